// The responsibility boundary (docs/concepts.md): layers × owner, with every active finding placed on its
// layer in the column of the party responsible for it, so the reader sees at once whom to call.
import { useTranslation } from "react-i18next";
import type { BoundaryCell, Layer, Owner } from "@/shared/api/types";
import { Badge, severityTone } from "@/shared/ui/Badge";
import { LAYERS_TOP_DOWN, OWNERS } from "@/shared/lib/domain";

export interface MatrixFinding {
  id: string | number;
  layer: string;
  title: string;
  severity?: string;
  /** From the health engine's routing when it says; otherwise the layer's owner in this node's boundary. */
  responsibleParty?: string | null;
  action?: string | null;
}

interface BoundaryMatrixProps {
  cells: BoundaryCell[];
  findings: MatrixFinding[];
  providerName?: string;
}

export interface PlacedFinding extends MatrixFinding {
  party: string;
}

/** Which row and column each finding lands in. Exported for tests and for the "whom to call" list. */
export function placeFindings(cells: BoundaryCell[], findings: MatrixFinding[]): {
  byLayer: Map<string, PlacedFinding[]>;
  unplaced: MatrixFinding[];
} {
  const ownerOf = new Map(cells.map((cell) => [cell.layer as string, cell.owner as string]));
  const byLayer = new Map<string, PlacedFinding[]>();
  const unplaced: MatrixFinding[] = [];
  for (const finding of findings) {
    const owner = ownerOf.get(finding.layer);
    if (owner === undefined) {
      unplaced.push(finding);
      continue;
    }
    const party = finding.responsibleParty || owner;
    const list = byLayer.get(finding.layer) ?? [];
    list.push({ ...finding, party });
    byLayer.set(finding.layer, list);
  }
  return { byLayer, unplaced };
}

export function useOwnerLabel(providerName?: string) {
  const { t } = useTranslation();
  return (owner: string) =>
    owner === "provider" && providerName
      ? t("owner.providerNamed", { name: providerName })
      : t(`owner.${owner}`, { defaultValue: owner });
}

export function BoundaryMatrix({ cells, findings, providerName }: BoundaryMatrixProps) {
  const { t } = useTranslation();
  const ownerLabel = useOwnerLabel(providerName);
  const { byLayer, unplaced } = placeFindings(cells, findings);
  const cellByLayer = new Map(cells.map((cell) => [cell.layer as string, cell]));
  const layers: string[] = [
    ...LAYERS_TOP_DOWN.filter((layer) => cellByLayer.has(layer)),
    ...cells.map((cell) => cell.layer as string).filter((layer) => !LAYERS_TOP_DOWN.includes(layer as Layer)),
  ];
  const columns: string[] = [...OWNERS];
  for (const cell of cells) {
    if (!columns.includes(cell.owner) && cell.owner !== "not_applicable") columns.push(cell.owner);
  }
  for (const placed of byLayer.values()) {
    for (const finding of placed) if (!columns.includes(finding.party) && finding.party !== "not_applicable") columns.push(finding.party);
  }

  return (
    <div className="matrix-wrap">
      <table className="matrix" data-testid="boundary-matrix">
        <caption className="matrix__caption">{t("boundary.caption")}</caption>
        <thead>
          <tr>
            <th scope="col">{t("boundary.layer")}</th>
            {columns.map((owner) => (
              <th scope="col" key={owner} data-owner={owner}>
                {ownerLabel(owner)}
              </th>
            ))}
            <th scope="col">{t("boundary.source")}</th>
          </tr>
        </thead>
        <tbody>
          {layers.map((layer) => {
            const cell = cellByLayer.get(layer) as BoundaryCell;
            const placed = byLayer.get(layer) ?? [];
            const notApplicable = cell.owner === "not_applicable";
            const hasFindings = placed.length > 0;
            return (
              <tr key={layer} data-layer={layer}
                className={`matrix__row${notApplicable ? " matrix__row--na" : ""}${hasFindings ? " matrix__row--alert" : ""}`}>
                <th scope="row">{t(`layer.${layer}`, { defaultValue: layer })}</th>
                {notApplicable && !hasFindings ? (
                  <td colSpan={columns.length} className="matrix__na">{t("owner.not_applicable")}</td>
                ) : (
                  columns.map((owner) => {
                    const isOwner = cell.owner === owner;
                    const here = placed.filter((finding) => finding.party === owner);
                    const responsible = here.length > 0;
                    const classes = ["matrix__cell"];
                    if (isOwner) classes.push("matrix__cell--owner");
                    if (responsible) classes.push("matrix__cell--responsible");
                    return (
                      <td key={owner} className={classes.join(" ")} data-owner={owner}
                        data-responsible={responsible ? "true" : undefined}
                        aria-label={responsible
                          ? t("boundary.responsibleAria", { layer: t(`layer.${layer}`, { defaultValue: layer }), party: ownerLabel(owner), count: here.length })
                          : undefined}>
                        {isOwner ? <span className="matrix__owner-mark">{t("boundary.owns")}</span> : null}
                        {responsible ? (
                          <>
                            <span className="matrix__responsible-label">{t("boundary.responsible")}</span>
                            <ul className="matrix__findings">
                              {here.map((finding) => (
                                <li key={finding.id} data-testid="matrix-finding">
                                  <Badge tone={severityTone(finding.severity)}>
                                    {t(`severity.${finding.severity ?? "unknown"}`, { defaultValue: finding.severity ?? "?" })}
                                  </Badge>{" "}
                                  {finding.title}
                                </li>
                              ))}
                            </ul>
                          </>
                        ) : null}
                      </td>
                    );
                  })
                )}
                <td className="matrix__source" title={cell.note || undefined}>
                  {t(`boundarySource.${cell.source}`, { defaultValue: cell.source })}
                  {cell.note ? <span className="muted small"> — {cell.note}</span> : null}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {unplaced.length ? (
        <p className="muted small" role="note">
          {t("boundary.unplaced", { titles: unplaced.map((finding) => finding.title).join(", ") })}
        </p>
      ) : null}
    </div>
  );
}

/** One line per active finding: the layer, the party responsible and the next action. */
export function WhomToCall({ cells, findings, providerName }: BoundaryMatrixProps) {
  const { t } = useTranslation();
  const ownerLabel = useOwnerLabel(providerName);
  const { byLayer } = placeFindings(cells, findings);
  const placed = [...byLayer.values()].flat();
  if (!placed.length) return <p className="muted">{t("boundary.noFindings")}</p>;
  return (
    <ul className="whom-to-call" aria-label={t("boundary.whomToCall")}>
      {placed.map((finding) => (
        <li key={finding.id} data-testid="whom-to-call" data-layer={finding.layer} data-party={finding.party}>
          <strong>{finding.title}</strong>
          {" → "}
          {t("boundary.onLayer", { layer: t(`layer.${finding.layer}`, { defaultValue: finding.layer }) })}
          {" → "}
          <span className={`party party--${finding.party as Owner}`}>{ownerLabel(finding.party)}</span>
          {finding.action ? <span className="muted">{" — "}{finding.action}</span> : null}
        </li>
      ))}
    </ul>
  );
}
