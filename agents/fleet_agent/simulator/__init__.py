"""Simulated nodes for demos, load tests and server tests.

Step by step, no threads (server tests)::

    from fleet_agent.simulator import SimulatedAgent, load_scenario
    scenario = load_scenario("xid")                      # bundled name or a JSON file path
    agent = SimulatedAgent.from_scenario(scenario, 0, work_dir=tmp_path)
    first = agent.step(0)                                # the report the agent would send at t=0
    later = agent.step(45)                               # faults due by t=45 s are active now

A whole fleet against a running server (what ``fleet-agent simulate`` does)::

    run_fleet(load_scenario("demo-fleet"), nodes=24, server=url, token=token, duration_s=300)
"""

from fleet_agent.simulator.agent import SimulatedAgent
from fleet_agent.simulator.fleet import FleetResult, run_fleet
from fleet_agent.simulator.scenario import (
    FAULTS,
    Fault,
    NodeSpec,
    Scenario,
    ScenarioError,
    bundled_scenarios,
    load_scenario,
    parse_scenario,
)

__all__ = [
    "FAULTS",
    "Fault",
    "FleetResult",
    "NodeSpec",
    "Scenario",
    "ScenarioError",
    "SimulatedAgent",
    "bundled_scenarios",
    "load_scenario",
    "parse_scenario",
    "run_fleet",
]
