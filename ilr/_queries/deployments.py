"""Statements on ilr.deployments, ilr.worker_deployments and ilr.timelines."""

from __future__ import annotations

DEPLOY_ON_INSERT_DEPLOYMENTS = (
    "insert into ilr.deployments (name, version, code_sha256) values (%s, %s, %s) on conflict do nothing"
)
"""Insert into ilr.deployments (``_ops.deployments.deploy_on``)."""

RESOLVE_VERSION_ON_SELECT_DEPLOYMENTS = (
    "select version from ilr.deployments where name = %s and retired_at is null order by created_at "
    "desc, version desc limit 1"
)
"""Read from ilr.deployments (``_ops.deployments.resolve_version_on``)."""

MIGRATE_IN_SELECT_DEPLOYMENTS = "select retired_at from ilr.deployments where name = %s and version = %s"
"""Read from ilr.deployments (``_ops.deployments.migrate_in``, ``_ops.deployments.resolve_version_on``)."""

RETIRE_IN_LOCK_DEPLOYMENTS = "select retired_at from ilr.deployments where name = %s and version = %s for update"
"""Lock and read rows of ilr.deployments (``_ops.deployments.retire_in``)."""

RETIRE_IN_UPDATE_DEPLOYMENTS = (
    "update ilr.deployments set retired_at = now() where name = %s and version = %s returning retired_at"
)
"""Set retired_at on ilr.deployments (``_ops.deployments.retire_in``)."""

RESOLVE_VERSION_ON_SELECT_DEPLOYMENTS_2 = (
    "select version from ilr.deployments where name = %s and retired_at is not null"
)
"""Read from ilr.deployments (``_ops.deployments.resolve_version_on``)."""

UNREGISTER_DELETE_WORKER_DEPLOYMENTS = "delete from ilr.worker_deployments where worker_id = %s"
"""Delete from ilr.worker_deployments (``_worker.deployments.unregister``)."""

REGISTER_DEPLOYMENTS_UPDATE_DEPLOYMENTS = "update ilr.deployments set code_sha256 = %s where name = %s and version = %s"
"""Set code_sha256 on ilr.deployments (``_worker.worker.Worker._register_deployments``)."""

REGISTER_DEPLOYMENTS_INSERT_DEPLOYMENTS = (
    "insert into ilr.deployments (name, version, code_sha256) values (%s, %s, %s) on conflict (name, "
    "version) do update set name = excluded.name returning code_sha256"
)
"""Insert into ilr.deployments (``_worker.worker.Worker._register_deployments``)."""


# -- from _ops/deployments.py -------------------------------------------------------------------

LIVE_SQL = "s.live_until > now()"
"""A worker_deployments row ``s`` whose worker is live: refreshed within its own staleness bound
(ilr._worker.deployments.DEPLOYMENT_STALE_AFTER refresh periods; the worker writes live_until)."""

UNSERVED_SQL = f"""
with due as (
  select w.name, w.version, count(*) as due from (
    select name, version from ilr.workflows
     where status in ('pending','sleeping') and available_at <= now()
    union all
    select name, version from ilr.workflows
     where status = 'running' and lease_expires_at <= now()) w
   group by w.name, w.version)
select due.name, due.version, due.due,
       (select max(s.seen_at) from ilr.worker_deployments s
         where s.name = due.name and s.version = due.version) as last_seen
  from due
 where not exists (select 1 from ilr.worker_deployments s
                    where s.name = due.name and s.version = due.version and {LIVE_SQL})
 order by due.name, due.version
"""
"""The (name, version) pairs with due work and no live worker, with the latest seen_at of any
worker for the pair (``_ops.deployments.unserved_on``)."""


# -- from _ops/failover.py ----------------------------------------------------------------------

TIMELINE_SEEN_SQL = """
with tl as (select ilr.current_timeline() as id),
ins as (insert into ilr.timelines (timeline_id) select id from tl on conflict do nothing
        returning timeline_id, seen_at)
select tl.id as timeline,
       coalesce((select seen_at from ins),
                (select seen_at from ilr.timelines t where t.timeline_id = tl.id)) as seen_at,
       (select min(timeline_id) from ilr.timelines) as baseline
  from tl
"""
"""Record the server's current timeline and read the switch to it. ``baseline`` comes from the
statement's snapshot, which does not hold the row ``ins`` adds: a new timeline reads the older
ones only. Nor does it hold a row another connection committed while ``ins`` waited on it:
``seen_at`` is then null and ``seen`` runs the statement again."""


# -- from _worker/deployments.py ----------------------------------------------------------------

WORKER_ID_KEY_SQL = "hashtextextended('ilr.worker:' || %(worker)s, 0)"
"""The bigint key of a worker id's session-level advisory lock (64 bits: two ids colliding is
out of reach)."""

WORKER_ID_LOCK_SQL = f"select pg_try_advisory_lock({WORKER_ID_KEY_SQL}) as taken"
"""Take a worker id's lock for the session's lifetime, without waiting: ``taken`` is false
while another session holds it. The server releases it when the session ends, however the
process holding it died."""

WORKER_ID_HOLDERS_SQL = f"""
select l.pid,
       exists (select 1 from ilr.worker_deployments s where s.worker_id = %(worker)s) as has_rows,
       exists (select 1 from ilr.worker_deployments s
                where s.worker_id = %(worker)s and s.live_until > now()) as live
  from pg_locks l
 where l.locktype = 'advisory' and l.granted and l.objsubid = 1 and l.pid <> pg_backend_pid()
   and l.database = (select oid from pg_database where datname = current_database())
   and ((l.classid::bigint << 32) | l.objid::bigint) = {WORKER_ID_KEY_SQL}
"""
"""The sessions holding a worker id's lock (pg_locks splits a bigint key into classid, its high
32 bits, and objid), with whether the id has worker_deployments rows and whether one is live."""

SEEN_SQL = """
insert into ilr.worker_deployments (worker_id, name, version, seen_at, live_until)
select %(worker)s, a.name, a.version, now(), now() + make_interval(secs => %(live)s)
  from unnest(%(names)s::text[], %(versions)s::text[]) as a(name, version)
on conflict (worker_id, name, version) do update set seen_at = excluded.seen_at, live_until = excluded.live_until
"""
"""Upsert every (name, version) this worker serves as seen now: at register and on each refresh."""


# -- the drain report (from _ops.deployments) --------------------------------------------------

DUE_SQL = """(w.status in ('pending','sleeping') and w.available_at <= now())
          or (w.status = 'running' and w.lease_expires_at <= now())"""
"""A workflow a worker would claim now: pending or sleeping and available, or running with a
lapsed lease (CLAIM_SQL's two scans)."""


def drain_report_sql(where: str) -> dict[str, str]:
    """The five reads of the drain report (``_ops.deployments.drain_report_in``), each filtered
    by ``where``: "" or a where clause of ``d.name = %s`` / ``d.version = %s`` terms, the same
    parameters for all five.

    Returns:
        {"deployments", "counts", "oldest", "due", "live"}: the deployments; workflows by
        (name, version, status); the oldest active workflow per (name, version); due work
        (DUE_SQL) per (name, version); live workers (LIVE_SQL) per (name, version).
    """
    more = "and" if where else "where"
    joined = "join ilr.deployments d on d.name = w.name and d.version = w.version"
    return {
        "deployments": f"select d.name, d.version, d.retired_at, d.created_at from ilr.deployments d {where} "
        "order by d.name, d.created_at, d.version",
        "counts": f"select w.name, w.version, w.status, count(*) as n from ilr.workflows w {joined} {where} "
        "group by w.name, w.version, w.status",
        "oldest": "select distinct on (w.name, w.version) w.name, w.version, w.id, w.status, w.created_at "
        f"from ilr.workflows w {joined} {where} {more} w.status in ('pending','running','sleeping') "
        "order by w.name, w.version, w.created_at, w.id",
        "due": f"select w.name, w.version, count(*) as n from ilr.workflows w {joined} "
        f"{where} {more} ({DUE_SQL}) group by w.name, w.version",
        "live": "select s.name, s.version, s.worker_id from ilr.worker_deployments s "
        "join ilr.deployments d on d.name = s.name and d.version = s.version "
        f"{where} {more} {LIVE_SQL} order by s.worker_id",
    }
