"""``agentkit ace show|history|rollback|verify FILE``: inspect and restore a playbook's versions."""

from __future__ import annotations

import argparse
import json

from agentkit.argtypes import NONNEG_INT
from agentkit.command import Command


class AceCommand(Command):
    name = "ace"
    help = "ACE playbooks: show, history, rollback, verify"
    description = (
        "A playbook FILE (JSON) keeps its history in FILE.log.jsonl beside it: every version can be "
        "shown, restored or checked."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        a = parser.add_subparsers(dest="action", required=True)
        s = a.add_parser("show", help="the playbook in the paper's text format (or JSON), with its counts")
        s.add_argument("file", help="the playbook's JSON file")
        s.add_argument("--version", type=NONNEG_INT, help="an older version (default: the current one)")
        s.add_argument("--format", default="text", choices=["text", "json", "stats"], help="what to print")
        h = a.add_parser("history", help="one line per version: time, source, changes, bullets")
        h.add_argument("file", help="the playbook's JSON file")
        r = a.add_parser("rollback", help="make an older version current again (recorded as a new version)")
        r.add_argument("file", help="the playbook's JSON file")
        r.add_argument("--to", type=NONNEG_INT, required=True, metavar="N", help="the version to restore")
        v = a.add_parser("verify", help="replay the log and check it rebuilds every version and the file byte for byte")
        v.add_argument("file", help="the playbook's JSON file")

    def run(self, a: argparse.Namespace) -> int:
        from agentkit.ace.store import PlaybookStore

        store = PlaybookStore(a.file)
        if a.action == "show":
            pb = store.playbook if a.version is None else store.at(a.version)
            if a.format == "json":
                print(pb.to_json(), end="")
            elif a.format == "stats":
                print(json.dumps({"version": pb.version, **pb.stats()}, indent=1))
            else:
                s = pb.stats()
                print(
                    f"# version {pb.version}: {s['bullets']} bullets, {s['problematic']} problematic, {s['unused']} unused"
                )
                print(pb.to_text())
        elif a.action == "history":
            print(f"{'version':>7}  {'time':20}  {'source':10}  {'bullets':>7}  changes")
            for row in store.history():
                print(
                    f"{row['version']:>7}  {row['time']:20}  {row['source']:10}  {row['bullets']:>7}  {row['changes']}"
                )
        elif a.action == "rollback":
            pb = store.rollback(a.to)
            print(f"{a.file}: version {pb.version} is version {a.to} again ({len(pb)} bullets)")
        else:
            store.verify()
            print(f"{a.file}: {len(store.entries)} log entries replay to the file byte for byte")
        return 0
