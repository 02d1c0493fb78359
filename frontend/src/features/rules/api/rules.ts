import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { Rule, RuleUpdate } from "../types/rules";

export function getRules(): Promise<Rule[]> {
  return unwrap(client.GET("/api/v1/rules/")).then(asList);
}

export function useRules() {
  return useQuery({ queryKey: ["rules"], queryFn: getRules, refetchInterval: 30_000 });
}

export function updateRule({ slug, changes }: { slug: string; changes: RuleUpdate }): Promise<Rule> {
  return unwrap(client.PATCH("/api/v1/rules/{slug}/", { params: { path: { slug } }, body: changes }));
}

export function useUpdateRule() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: updateRule,
    onSuccess: (rule) => {
      queryClient.setQueryData<Rule[]>(["rules"], (rules) => rules?.map((r) => (r.slug === rule.slug ? rule : r)));
    },
  });
}
