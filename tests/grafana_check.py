#!/usr/bin/python3
"""Checks deploy/grafana/: the dashboard JSON has the fields Grafana needs, every panel names a
provisioned datasource, and (with --db) every PostgreSQL panel's SQL, its Grafana macros and
$tenant expanded as Grafana would, runs against a database and returns rows.

    grafana_check.py [--db URL] DEPLOY_GRAFANA_DIR
Needs python3-yaml (Debian's python3). Exits 1 listing what is wrong.
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys

import yaml

ap = argparse.ArgumentParser()
ap.add_argument("--db")
ap.add_argument("dir")
args = ap.parse_args()
root = pathlib.Path(args.dir)
errors = []


def err(msg):
    errors.append(msg)
    print("FAIL " + msg)


ds = {}
for f in sorted((root / "provisioning/datasources").glob("*.yaml")):
    for d in yaml.safe_load(f.read_text())["datasources"]:
        for k in ("name", "uid", "type", "url"):
            if not d.get(k):
                err("%s: datasource without %s" % (f.name, k))
        ds[d["uid"]] = d["type"]
if sorted(ds.values()) != ["grafana-postgresql-datasource", "prometheus"]:
    err("want one PostgreSQL and one Prometheus datasource, have %r" % ds)
prov = yaml.safe_load((root / "provisioning/dashboards/reclass.yaml").read_text())
if not prov.get("providers") or not prov["providers"][0].get("options", {}).get("path"):
    err("dashboard provider without options.path")

boards = sorted((root / "dashboards").glob("*.json"))
if not boards:
    err("no dashboards")
sqls = []
for f in boards:
    d = json.loads(f.read_text())
    for k, t in (("uid", str), ("title", str), ("schemaVersion", int), ("panels", list), ("time", dict)):
        if not isinstance(d.get(k), t):
            err("%s: %s missing or not %s" % (f.name, k, t.__name__))
    for v in d.get("templating", {}).get("list", []):
        if v.get("datasource", {}).get("uid") not in ds or not v.get("query") or not v.get("name"):
            err("%s: variable %r lacks name, query or a provisioned datasource" % (f.name, v.get("name")))
    ids = [p.get("id") for p in d.get("panels", [])]
    if len(set(ids)) != len(ids) or not all(isinstance(i, int) for i in ids):
        err("%s: panel ids must be unique integers: %r" % (f.name, ids))
    cells = set()
    for p in d.get("panels", []):
        name = "%s panel %s %r" % (f.name, p.get("id"), p.get("title"))
        for k in ("type", "title", "gridPos", "targets", "datasource"):
            if not p.get(k):
                err(name + ": no " + k)
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in ("x", "y", "w", "h")) or g.get("x", 0) + g.get("w", 0) > 24:
            err(name + ": gridPos needs integer x, y, w, h within 24 columns")
        else:
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    if (x, y) in cells:
                        err(name + ": overlaps another panel at %d,%d" % (x, y))
                        break
                    cells.add((x, y))
        for t in p.get("targets", []):
            uid = t.get("datasource", {}).get("uid")
            if uid not in ds or t["datasource"].get("type") != ds.get(uid):
                err(name + ": target datasource %r is not provisioned with that type" % t.get("datasource"))
                continue
            if not t.get("refId"):
                err(name + ": target without refId")
            if ds[uid] == "prometheus":
                if not t.get("expr"):
                    err(name + ": Prometheus target without expr")
            elif not t.get("rawSql") or t.get("format") not in ("time_series", "table"):
                err(name + ": PostgreSQL target needs rawSql and format time_series|table")
            else:
                sqls.append((name, t["rawSql"], t["format"]))
print("dashboards %d, datasources %d, PostgreSQL panels' queries %d" % (len(boards), len(ds), len(sqls)))


def psql(sql):
    return subprocess.run(["psql", args.db, "-qtAX", "-v", "ON_ERROR_STOP=1", "-F", "\t", "-c", sql],
                          capture_output=True, text=True)


def expand(sql, t0, t1, tenants):
    """Grafana's macros as its PostgreSQL datasource expands them."""
    sql = re.sub(r"\$__timeFilter\(([^)]+)\)", r"\1 BETWEEN '%s' AND '%s'" % (t0, t1), sql)
    sql = sql.replace("$__timeFrom()", "'%s'" % t0).replace("$__timeTo()", "'%s'" % t1)
    sql = re.sub(r"\$__timeGroupAlias\(([^,]+),\s*'?(\d+)m'?\)",
                 lambda m: "to_timestamp(floor(extract(epoch FROM %s) / %d) * %d) AS \"time\""
                 % (m.group(1), int(m.group(2)) * 60, int(m.group(2)) * 60), sql)
    sql = sql.replace("$tenant", ",".join("'%s'" % t.replace("'", "''") for t in tenants))
    left = re.findall(r"\$\w+", sql)
    if left:
        raise ValueError("unexpanded %s" % left)
    return sql


if args.db:
    r = psql("SELECT now() - interval '1 day', now() + interval '1 hour'")
    t0, t1 = r.stdout.strip().split("\t")
    var = json.loads(boards[0].read_text())["templating"]["list"][0]
    tenants = psql(var["query"]).stdout.split()
    print("tenant variable: %s" % " ".join(tenants))
    if not tenants:
        err("the tenant variable's query returns nothing")
    for name, sql, fmt in sqls:
        try:
            q = expand(sql, t0, t1, tenants)
        except ValueError as e:
            err("%s: %s" % (name, e))
            continue
        r = psql(q)
        rows = [l for l in r.stdout.splitlines() if l]
        if r.returncode != 0:
            err("%s: %s" % (name, r.stderr.strip()))
        elif not rows:
            err("%s: no rows" % name)
        elif fmt == "time_series" and not re.match(r"\d{4}-\d\d-\d\d", rows[0].split("\t")[0]):
            err("%s: first column is not a time: %r" % (name, rows[0]))
        else:
            print("ok   %s: %d rows" % (name, len(rows)))
print("grafana_check: %d problems" % len(errors))
sys.exit(1 if errors else 0)
