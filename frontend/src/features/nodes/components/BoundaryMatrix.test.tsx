import { render, screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { BoundaryCell } from "@/shared/api/types";
import { BoundaryMatrix, WhomToCall, placeFindings, type MatrixFinding } from "./BoundaryMatrix";

// Effective boundaries as /api/v1/nodes/{id}/boundary/ returns them (top layer first).
const cloudDedicated: BoundaryCell[] = [
  { layer: "application", owner: "us", source: "default", note: "" },
  { layer: "framework", owner: "us", source: "default", note: "" },
  { layer: "cuda_runtime", owner: "us", source: "default", note: "" },
  { layer: "gpu_driver", owner: "us", source: "default", note: "" },
  { layer: "host_os", owner: "us", source: "default", note: "" },
  { layer: "virtualization", owner: "provider", source: "default", note: "" },
  { layer: "hardware", owner: "provider", source: "default", note: "" },
  { layer: "facility", owner: "provider", source: "default", note: "" },
];
const bareMetalOwned: BoundaryCell[] = [
  { layer: "application", owner: "us", source: "default", note: "" },
  { layer: "framework", owner: "us", source: "default", note: "" },
  { layer: "cuda_runtime", owner: "us", source: "default", note: "" },
  { layer: "gpu_driver", owner: "us", source: "default", note: "" },
  { layer: "host_os", owner: "us", source: "default", note: "" },
  { layer: "virtualization", owner: "not_applicable", source: "default", note: "" },
  { layer: "hardware", owner: "hardware_vendor", source: "default", note: "" },
  { layer: "facility", owner: "us", source: "provider", note: "own datacenter" },
];
const xid79: MatrixFinding = { id: 1, layer: "hardware", title: "Xid 79: GPU has fallen off the bus", severity: "critical" };

function row(layer: string) {
  return document.querySelector(`tr[data-layer="${layer}"]`) as HTMLElement;
}

describe("BoundaryMatrix", () => {
  it("draws the layers top to bottom and marks each layer's owner", () => {
    render(<BoundaryMatrix cells={cloudDedicated} findings={[]} providerName="AWS" />);
    const layers = [...document.querySelectorAll("tbody tr")].map((tr) => tr.getAttribute("data-layer"));
    expect(layers).toEqual(["application", "framework", "cuda_runtime", "gpu_driver", "host_os", "virtualization", "hardware", "facility"]);
    expect(row("hardware").querySelector('td[data-owner="provider"]')).toHaveClass("matrix__cell--owner");
    expect(row("gpu_driver").querySelector('td[data-owner="us"]')).toHaveClass("matrix__cell--owner");
    expect(screen.getByRole("columnheader", { name: "Provider (AWS)" })).toBeInTheDocument();
    expect(document.querySelector("[data-responsible]")).toBeNull();
  });

  it("places an Xid 79 on the hardware layer with the provider responsible on a cloud node", () => {
    render(<BoundaryMatrix cells={cloudDedicated} findings={[xid79]} providerName="AWS" />);
    const cell = row("hardware").querySelector('td[data-responsible="true"]') as HTMLElement;
    expect(cell).toHaveAttribute("data-owner", "provider");
    expect(cell).toHaveClass("matrix__cell--responsible");
    expect(within(cell).getByText(/Xid 79/)).toBeInTheDocument();
    expect(cell).toHaveAccessibleName("Hardware: Provider (AWS) is responsible for 1 active finding");
    // nowhere else
    expect(document.querySelectorAll('[data-responsible="true"]')).toHaveLength(1);
    expect(row("gpu_driver")).not.toHaveTextContent("Xid 79");
  });

  it("places the same Xid 79 with us + the hardware vendor on an owned bare-metal node", () => {
    render(<BoundaryMatrix cells={bareMetalOwned} findings={[xid79]} />);
    const cell = row("hardware").querySelector('td[data-responsible="true"]') as HTMLElement;
    expect(cell).toHaveAttribute("data-owner", "hardware_vendor");
    expect(within(cell).getByText(/Xid 79/)).toBeInTheDocument();
    expect(row("virtualization")).toHaveTextContent("Not applicable");
    expect(row("facility")).toHaveTextContent("provider contract");
  });

  it("follows the health engine's responsible party when it names one", () => {
    render(<BoundaryMatrix cells={cloudDedicated} findings={[{ ...xid79, responsibleParty: "shared" }]} />);
    expect(row("hardware").querySelector('td[data-responsible="true"]')).toHaveAttribute("data-owner", "shared");
  });

  it("lists findings whose layer the boundary does not know instead of dropping them", () => {
    const { byLayer, unplaced } = placeFindings(cloudDedicated, [xid79, { id: 2, layer: "network", title: "Odd one" }]);
    expect(byLayer.get("hardware")?.[0].party).toBe("provider");
    expect(unplaced.map((f) => f.title)).toEqual(["Odd one"]);
    render(<BoundaryMatrix cells={cloudDedicated} findings={[{ id: 2, layer: "network", title: "Odd one" }]} />);
    expect(screen.getByRole("note")).toHaveTextContent("Odd one");
  });
});

describe("WhomToCall", () => {
  it("names the party for each finding", () => {
    render(<WhomToCall cells={bareMetalOwned} findings={[{ ...xid79, action: "Drain, reboot once, RMA if it repeats." }]} />);
    const item = screen.getByTestId("whom-to-call");
    expect(item).toHaveAttribute("data-party", "hardware_vendor");
    expect(item).toHaveTextContent("Hardware layer");
    expect(item).toHaveTextContent("Us + hardware vendor");
    expect(item).toHaveTextContent("RMA");
  });

  it("says nobody needs calling when nothing is open", () => {
    render(<WhomToCall cells={cloudDedicated} findings={[]} />);
    expect(screen.getByText(/nobody needs to be called/)).toBeInTheDocument();
  });
});
