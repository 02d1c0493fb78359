import { useTranslation } from "react-i18next";
import type { Node } from "@/shared/api/types";
import { formatDateTime } from "@/shared/lib/format";
import { Badge, nodeStateTone } from "@/shared/ui/Badge";
import { KeyValueList } from "@/shared/ui/KeyValueList";
import { Panel } from "@/shared/ui/Panel";

export function InventoryPanel({ node }: { node: Node }) {
  const { t } = useTranslation();
  const labels = Object.entries((node.labels ?? {}) as Record<string, string>);
  return (
    <Panel title={t("node.inventory")} testId="inventory-panel">
      <KeyValueList
        items={[
          [t("nodes.col.state"), <Badge tone={nodeStateTone(node.state)}>{t(`nodeState.${node.state}`, { defaultValue: node.state ?? "" })}</Badge>],
          [t("nodes.col.provider"), node.provider_name],
          [t("node.site"), node.site_name ?? "—"],
          [t("nodes.col.pool"), node.pool_name ?? "—"],
          [t("nodes.col.deliveryForm"), t(`deliveryForm.${node.delivery_form}`)],
          [t("nodes.col.billingMode"), t(`billingMode.${node.billing_mode}`, { defaultValue: node.billing_mode ?? "" })],
          [t("node.expectedGpus"), node.expected_gpu_count ? `${node.expected_gpu_count} × ${node.expected_gpu_model || "GPU"}` : "—"],
          [t("node.instance"), [node.instance_type, node.instance_id].filter(Boolean).join(" · ") || "—"],
          [t("node.machineId"), node.machine_id || "—"],
          [t("node.publicEndpoint"), node.public_endpoint ? t("common.yes") : t("common.no")],
          [t("node.labels"), labels.length ? labels.map(([k, v]) => <code key={k} className="label-chip">{k}={v}</code>) : "—"],
          [t("node.created"), formatDateTime(node.created_at)],
        ]}
      />
    </Panel>
  );
}
