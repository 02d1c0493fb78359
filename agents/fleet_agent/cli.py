"""``fleet-agent`` command line: run, collect, enroll, verify, status, spool, simulate.

Exit codes: 0 success, 1 a check or an operation failed, 2 bad configuration or usage.
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleet_agent import __version__
from fleet_agent.config import SETTINGS, Config, ConfigError, load_config
from fleet_agent.timeutil import rfc3339

log = logging.getLogger("fleet_agent")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # same exit code and shape as ConfigError
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _settings_flags() -> argparse.ArgumentParser:
    """Every setting as a flag. Values stay strings here; config.py validates and names the setting."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("settings (override the config file and FLEET_AGENT_* variables)")
    group.add_argument("--config", metavar="FILE", help="config file (default /etc/fleet-agent/agent.toml)")
    for setting in SETTINGS:
        if setting.name == "checkpoint_dirs":
            group.add_argument(
                setting.flag_name,
                dest=setting.name,
                action="append",
                metavar="DIR",
                help=f"{setting.help} (repeatable)",
            )
        else:
            group.add_argument(setting.flag_name, dest=setting.name, metavar="VALUE", help=setting.help)
    return parent


def build_parser() -> argparse.ArgumentParser:
    settings = _settings_flags()
    parser = _Parser(prog="fleet-agent", description="GPU fleet node agent")
    parser.add_argument("--version", action="version", version=f"fleet-agent {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    commands.add_parser("run", parents=[settings], help="run the agent (daemon loop)")

    collect = commands.add_parser("collect", parents=[settings], help="collect one report and print it")
    collect.add_argument("--once", action="store_true", help="one report (the only mode; kept for clarity)")
    collect.add_argument("--json", action="store_true", help="print the report as JSON")
    collect.add_argument(
        "--window",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between the two /proc samples that rates need (default 1, 0 = no rates)",
    )

    enroll = commands.add_parser(
        "enroll", parents=[settings], help="exchange an enrolment token for a credential"
    )
    enroll.add_argument("--token", required=True, help="enrolment token (fe_…)")

    verify = commands.add_parser("verify", parents=[settings], help="smoke-test this node and print PASS/FAIL")
    verify.add_argument("--level", type=int, choices=(1, 2, 3), default=None,
                        help="also run DCGM's active diagnostic at this level (dcgmi diag -r N); the running agent "
                             "reports its result")

    status = commands.add_parser(
        "status", parents=[settings], help="spool depth, sequences, instance id, set-aside reports"
    )
    status.add_argument("--json", action="store_true")

    spool = commands.add_parser("spool", help="reports the server refused, set aside in the spool")
    spool_commands = spool.add_subparsers(dest="spool_command", required=True, parser_class=_Parser)
    show = spool_commands.add_parser(
        "show-rejected", parents=[settings], help="list the set-aside reports and why the server refused them"
    )
    show.add_argument(
        "--json", action="store_true", help="one JSON object per line, with the report itself (an export)"
    )
    show.add_argument("sequences", nargs="*", type=int, metavar="SEQUENCE", help="only these (default: all)")
    retry = spool_commands.add_parser(
        "retry-rejected", parents=[settings], help="queue set-aside reports again, under new sequences"
    )
    retry.add_argument("sequences", nargs="*", type=int, metavar="SEQUENCE", help="only these (default: all)")
    drop = spool_commands.add_parser("drop-rejected", parents=[settings], help="delete set-aside reports for good")
    drop.add_argument("sequences", nargs="*", type=int, metavar="SEQUENCE", help="these reports")
    drop.add_argument("--all", action="store_true", help="every set-aside report")

    simulate = commands.add_parser("simulate", help="run N simulated agents against a server")
    simulate.add_argument("--nodes", type=int, required=True, help="number of simulated agents")
    simulate.add_argument(
        "--scenario", required=True, help="scenario file, or the name of a bundled one (e.g. demo-fleet, xid)"
    )
    simulate.add_argument("--server", required=True, help="control-plane base URL")
    simulate.add_argument("--token", required=True, help="enrolment token valid for --nodes enrolments")
    simulate.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    simulate.add_argument(
        "--interval",
        type=float,
        default=None,
        metavar="S",
        help="report interval (default: the scenario's, else 15)",
    )
    simulate.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help="keep spools and credentials here (default: a temporary directory)",
    )
    simulate.add_argument("--ca-file", default=None, metavar="FILE")
    simulate.add_argument("--workers", type=int, default=4, help="delivery worker threads (default 4)")
    simulate.add_argument("--seed", type=int, default=None, help="random seed (default: the scenario's)")
    simulate.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    commands.add_parser("scenarios", help="list the bundled simulator scenarios")
    return parser


def _config(args: argparse.Namespace) -> Config:
    flags = {setting.name: getattr(args, setting.name, None) for setting in SETTINGS}
    return load_config(config_file=args.config, flags=flags)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "simulate":
            _setup_logging(args.log_level)
            return cmd_simulate(args)
        if args.command == "scenarios":
            return cmd_scenarios()
        config = _config(args)
        _setup_logging(config.log_level)
        handler = {
            "run": cmd_run,
            "collect": cmd_collect,
            "enroll": cmd_enroll,
            "verify": cmd_verify,
            "status": cmd_status,
            "spool": cmd_spool,
        }[args.command]
        return handler(config, args)
    except ConfigError as err:
        print(f"fleet-agent: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, sqlite3.Error) as err:  # e.g. a state directory the agent's user cannot write
        print(f"fleet-agent: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_FAILED


# -- commands ------------------------------------------------------------------------------------


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from fleet_agent.daemon import Daemon

    daemon = Daemon(config)
    daemon.install_signal_handlers()
    return daemon.run()


def cmd_collect(config: Config, args: argparse.Namespace) -> int:
    """One report, printed; sends nothing and leaves the daemon's state (spool, log offsets) alone."""
    from fleet_agent.assembly import make_core
    from fleet_agent.identity import node_identity
    from fleet_agent.report import EphemeralSequences
    from fleet_agent.spool import read_spool_state

    state = read_spool_state(config.spool_path)
    sequences = EphemeralSequences(
        instance_id=(state or {}).get("instance_id") or str(uuid.uuid4()),
        last_sequence=(state or {}).get("last_sequence", 0),
    )
    # The kernel log is read only when a source is named explicitly, from a throwaway offset file.
    source = config.kernel_log if config.kernel_log not in ("auto", "off") else None
    with tempfile.TemporaryDirectory(prefix="fleet-agent-collect-") as scratch:
        core = make_core(
            config,
            sequences=sequences,
            spool=None,
            identity=node_identity(config.host_root),
            kernel_log_source=source,
            kernel_log_state=Path(scratch) / "kernel_log.state",
        )
        core.refresh_cloud_identity()
        core.poll_notice()
        if args.window > 0:
            core.system.prime()
            time.sleep(args.window)  # outside collection: gives the rate fields a real interval
        report = core.collect()
        core.nvml.shutdown()
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        _print_summary(report)
    return EXIT_OK


def _print_summary(report: dict) -> None:
    visibility = report["visibility"]
    print(
        f"NVML: {visibility['nvml']}  GPUs: {visibility['gpu_count']}  "
        f"expected: {visibility['expected_gpu_count']}"
    )
    if visibility["message"]:
        print(f"  {visibility['message']}")
    for gpu in report["gpus"]:
        print(
            f"  GPU {gpu['index']} {gpu['name']} {gpu['pci_bus_id']} util={gpu['utilization_gpu_pct']}% "
            f"temp={gpu['temperature_c']}C lost={gpu['lost']}"
        )
    system = report["system"] or {}
    print(
        f"CPU busy {system.get('cpu_busy_pct')}%  steal {system.get('cpu_steal_pct')}%  "
        f"load1 {system.get('load1')}"
    )
    print(f"events: {len(report['events'])}  (use --json for the full report)")


def cmd_enroll(config: Config, args: argparse.Namespace) -> int:
    from fleet_agent.assembly import load_identity, make_cloud
    from fleet_agent.client import ControlPlaneClient
    from fleet_agent.credentials import credential_path
    from fleet_agent.enroll import EnrollmentError, enroll, enrollment_facts
    from fleet_agent.nvml import NvmlAdapter
    from fleet_agent.spool import Spool

    if not config.server:
        raise ConfigError("setting 'server' is required to enroll (--server URL or FLEET_AGENT_SERVER)")
    spool = Spool(config.spool_path, max_bytes=config.spool_max_bytes)  # creates the instance id once
    adapter = NvmlAdapter(expected_gpu_count=config.expected_gpus)
    sample = adapter.sample()
    adapter.shutdown()
    cloud = make_cloud(config)
    facts = enrollment_facts(
        identity=load_identity(config),
        instance_id=spool.instance_id,
        gpus=sample.gpus,
        cloud=cloud.identity() if cloud is not None else None,
    )
    spool.close()
    client = ControlPlaneClient(config.server, ca_file=config.ca_file)
    try:
        enrollment = enroll(client, args.token, facts, credential_file=credential_path(config.state_dir))
    except EnrollmentError as err:
        print(f"fleet-agent: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(f"enrolled as node {enrollment.node_id}; credential written to {credential_path(config.state_dir)}")
    return EXIT_OK


def cmd_verify(config: Config, args: argparse.Namespace) -> int:
    from fleet_agent.verify import FAIL, print_table, run_checks

    results = run_checks(config, level=getattr(args, "level", None))
    print_table(results, sys.stdout)
    return EXIT_FAILED if any(r.result == FAIL for r in results) else EXIT_OK


def cmd_status(config: Config, args: argparse.Namespace) -> int:
    from fleet_agent.credentials import credential_path, load_enrollment
    from fleet_agent.spool import read_spool_state

    state = read_spool_state(config.spool_path)
    try:
        enrollment = load_enrollment(credential_path(config.state_dir))
    except ValueError as err:
        print(f"fleet-agent: {err}", file=sys.stderr)
        enrollment = None
    status: dict[str, Any] = {
        "state_dir": config.state_dir,
        "enrolled": enrollment is not None,
        "node_id": enrollment.node_id if enrollment else None,
        "server": enrollment.server if enrollment else config.server,
        "instance_id": state["instance_id"] if state else None,
        "spool_depth": state["depth"] if state else 0,
        "spool_bytes": state["bytes"] if state else 0,
        "last_sequence": state["last_sequence"] if state else 0,
        "last_acked_sequence": state["last_acked_sequence"] if state else 0,
        "rejected_reports": state["rejected"] if state else 0,
        "rejected_total": state["rejected_total"] if state else 0,
        "rejected_dropped": state["rejected_dropped"] if state else 0,
        "last_rejection": state["last_rejection"] if state else None,
    }
    if args.json:
        print(json.dumps(status))
        return EXIT_OK
    for key, value in status.items():
        if key == "last_rejection" and value:
            value = f"report {value['sequence']} at {value['rejected_at']}: {value['reason']}"
        print(f"{key:20} {value}")
    if status["rejected_reports"]:
        print("set-aside reports: `fleet-agent spool show-rejected`, then `retry-rejected` or `drop-rejected`")
    return EXIT_OK


def cmd_spool(config: Config, args: argparse.Namespace) -> int:
    """The rejected table: list or export (read-only), re-queue, drop. Run it as the agent's user."""
    from fleet_agent.spool import Spool, read_rejected

    selected = args.sequences or None
    if args.spool_command == "show-rejected":
        rejected = read_rejected(config.spool_path, selected)
        for report in rejected or []:
            at = rfc3339(datetime.fromtimestamp(report.rejected_at, UTC))
            if args.json:
                print(json.dumps({"sequence": report.sequence, "rejected_at": at, "reason": report.reason,
                                  "report": json.loads(report.body)}, ensure_ascii=False))
            else:
                print(f"{report.sequence:>10}  {at}  {len(report.body):>8} B  {report.reason}")
        if not rejected and not args.json:
            print("no set-aside reports" if rejected is not None else f"no spool at {config.spool_path}")
        return EXIT_OK
    if not config.spool_path.exists():
        print(f"fleet-agent: no spool at {config.spool_path}", file=sys.stderr)
        return EXIT_FAILED
    if args.spool_command == "drop-rejected" and not (selected or args.all):
        print("fleet-agent: name the reports to drop (SEQUENCE …) or pass --all", file=sys.stderr)
        return EXIT_USAGE
    spool = Spool(config.spool_path, max_bytes=config.spool_max_bytes)
    try:
        if args.spool_command == "retry-rejected":
            moved = spool.requeue_rejected(selected)
            done = [old for old, _ in moved]
            print(f"queued {len(moved)} report(s) again" + "".join(f"\n  {old} -> {new}" for old, new in moved))
        else:
            done = spool.drop_rejected(selected)
            print(f"dropped {len(done)} set-aside report(s)")
    finally:
        spool.close()
    missing = sorted(set(selected or ()) - set(done))
    if missing:
        print(f"fleet-agent: not among the set-aside reports: {', '.join(map(str, missing))}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from fleet_agent.simulator import ScenarioError, load_scenario, run_fleet

    if args.nodes < 1:
        print("fleet-agent: --nodes must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as err:
        print(f"fleet-agent: {err}", file=sys.stderr)
        return EXIT_USAGE
    result = run_fleet(
        scenario,
        nodes=args.nodes,
        server=args.server,
        token=args.token,
        duration_s=args.duration,
        interval_s=args.interval,
        state_dir=args.state_dir,
        ca_file=args.ca_file,
        workers=args.workers,
        seed=args.seed,
        install_signal_handlers=True,
    )
    print(json.dumps(result.summary()))
    return EXIT_OK if result.enrolled else EXIT_FAILED


def cmd_scenarios() -> int:
    from fleet_agent.simulator import bundled_scenarios, load_scenario

    for name in bundled_scenarios():
        print(f"{name:28} {load_scenario(name).description}")
    return EXIT_OK
