import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, asList, type Page } from "@/shared/api/client";
import type { Rule, RuleUpdate } from "../types/rules";

export function getRules(): Promise<Rule[]> {
  return api.get<Rule[] | Page<Rule>>("rules/").then(asList);
}

export function useRules() {
  return useQuery({ queryKey: ["rules"], queryFn: getRules, refetchInterval: 30_000 });
}

export function updateRule({ slug, changes }: { slug: string; changes: RuleUpdate }): Promise<Rule> {
  return api.patch<Rule>(`rules/${encodeURIComponent(slug)}/`, changes);
}

export function useUpdateRule() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: updateRule,
    onSuccess: (rule) => {
      client.setQueryData<Rule[]>(["rules"], (rules) => rules?.map((r) => (r.slug === rule.slug ? rule : r)));
    },
  });
}
