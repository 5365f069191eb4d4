"""What the failover run (prove/harness/failover.py) reads of the databases: every row key in one
repeatable-read snapshot (``snapshot``), what a switch lost between two snapshots (``lost``,
``sizes``), and the checks after the run: every receipt held against the ledger
(``check_receipts``) and the failover rule for the first sends after the switch
(``lost_send_rule``)."""

from __future__ import annotations

import json

import psycopg

from prove.queries import DISPATCHED_ENTRIES, FAILOVER_EFFECTS, SNAPSHOT_SQL


def snapshot(conninfo: str) -> dict:
    """Every row key the comparison needs, read in one repeatable-read transaction.

    Returns:
        {table: {key: row}} for SNAPSHOT_SQL's tables.
    """
    with psycopg.connect(conninfo, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        with conn.transaction():
            conn.execute("set transaction isolation level repeatable read, read only")
            return {name: {r["k"]: r for r in conn.execute(sql).fetchall()} for name, sql in SNAPSHOT_SQL.items()}


def connect(dsn: str, timeout: float = 2.0):
    return psycopg.connect(dsn, autocommit=True, row_factory=psycopg.rows.dict_row, connect_timeout=timeout)


def lost(before: dict, after: dict) -> dict:
    """Counts of keys in ``before`` missing from ``after``, per table; journal and effects by kind."""
    out = {t: len(set(before[t]) - set(after[t])) for t in ("steps", "signals", "claims", "workflows")}
    gone = set(before["journal"]) - set(after["journal"])
    out["journal"] = len(gone)
    kinds: dict[str, int] = {}
    for h in gone:
        kinds[before["journal"][h]["kind"]] = kinds.get(before["journal"][h]["kind"], 0) + 1
    out["journal_by_kind"] = dict(sorted(kinds.items()))
    out["effects_committed"] = sum(
        1
        for k, r in before["effects"].items()
        if r["state"] == "committed" and after["effects"].get(k, {}).get("state") != "committed"
    )
    out["effects_dispatched"] = sum(
        1
        for k, r in before["effects"].items()
        if r["state"] in ("dispatched", "committed")
        and after["effects"].get(k, {}).get("state") not in ("dispatched", "committed")
    )
    return out


def sizes(snap: dict) -> dict:
    return {
        "steps": len(snap["steps"]),
        "journal": len(snap["journal"]),
        "signals": len(snap["signals"]),
        "claims": len(snap["claims"]),
        "effects_committed": sum(1 for r in snap["effects"].values() if r["state"] == "committed"),
        "effects_dispatched": sum(1 for r in snap["effects"].values() if r["state"] == "dispatched"),
    }


def check_receipts(conn, apps_by_tier: dict[int, dict[str, int]]) -> dict:
    """verify() every effect's receipt and hold it against the ledger: happened True needs an
    application, happened False none, happened_once True exactly one."""
    from ilr import receipt_bundle, verify_receipt

    untruthful = []
    n = 0
    for row in conn.execute(FAILOVER_EFFECTS).fetchall():
        n += 1
        v = verify_receipt(receipt_bundle(conn, row["effect_id"]))
        apps = apps_by_tier.get(row["tier"], {}).get(row["effect_id"], 0)
        if (
            (v["happened"] is True and apps == 0)
            or (v["happened"] is False and apps > 0)
            or (v["happened_once"] is True and apps != 1)
            or not v["chain_intact"]
        ):
            untruthful.append(
                {
                    "effect_id": row["effect_id"],
                    "tier": row["tier"],
                    "state": row["state"],
                    "happened": v["happened"],
                    "happened_once": v["happened_once"],
                    "applications": apps,
                }
            )
    return {"checked": n, "untruthful": len(untruthful), "examples": untruthful[:5]}


def lost_send_rule(conn, access_log: list[dict]) -> dict:
    """The failover rule (ilr.failover): a DISPATCHED that carries ``failover`` was authorized
    only after seen_at + send_timeout + settle_margin, and every earlier request for its key had
    been answered (or dropped) before it."""
    bad = []
    n = 0
    posts: dict[str, list[dict]] = {}
    for e in access_log:
        if e.get("method") == "POST" and e.get("path") == "/refunds" and e.get("key"):
            posts.setdefault(e["key"], []).append(e)
    for r in conn.execute(DISPATCHED_ENTRIES).fetchall():
        e = json.loads(r["body"])
        fo = e.get("failover")
        if not fo:
            continue
        n += 1
        settled_at = fo["seen_at"] + (e["send_deadline"] - e["ts"]) + (e.get("settle_margin") or 0)
        overlapping = [
            p
            for p in posts.get(r["effect_id"], [])
            if p["t_wall"] < e["ts"] and (p.get("t_done_wall") or p["t_wall"]) > e["ts"]
        ]
        if e["ts"] < settled_at - 1e-3 or overlapping:
            bad.append(
                {"effect_id": r["effect_id"], "ts": e["ts"], "settled_at": settled_at, "overlapping": len(overlapping)}
            )
    return {"first_sends_after_switch": n, "broken": len(bad), "examples": bad[:5]}
