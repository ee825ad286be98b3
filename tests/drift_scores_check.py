#!/usr/bin/python3
"""The drift scores of migrations/004_drift.sql against an independent reference.

Writes synthetic drift_windows (and ticket_results for a job baseline) with known shifts into
an empty, migrated database, pins baselines, reads drift_scores() and recomputes every score
with numpy/scipy: PSI as the symmetric Kullback-Leibler divergence of the smoothed proportions
(scipy.stats.entropy both ways), JS as scipy.spatial.distance.jensenshannon(base=2) squared.
Statuses are checked against the shift each tenant was built with.

    drift_scores_check.py DB_URL
Debian's python3 (python3-numpy, python3-scipy; tests/run.sh installs them).
"""
import json
import subprocess
import sys

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.stats import entropy

EPS = 1e-4
DB = sys.argv[1]
MODEL = "m1"
failures = []


def psql(sql):
    r = subprocess.run(["psql", DB, "-qtAX", "-v", "ON_ERROR_STOP=1", "-c", sql],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("psql failed: %s\n%s" % (r.stderr, sql[:500]))
    return r.stdout


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        failures.append(name)


rng = np.random.default_rng(15)
LABELS = ["l%02d" % i for i in range(20)]
BASE_P = rng.dirichlet(np.full(20, 5.0))
BASE_CONF = np.array([1, 1, 2, 3, 5, 8, 10, 15, 25, 30], dtype=float)
BASE_CONF /= BASE_CONF.sum()


def window(p_labels, p_conf, n, labels=LABELS):
    lab = rng.multinomial(n, p_labels)
    hist = rng.multinomial(n, p_conf)
    return {labels[i]: int(c) for i, c in enumerate(lab) if c > 0}, [int(c) for c in hist]


def insert_window(tenant, start, lc, hist, worker="w1"):
    n = sum(hist)
    psql("INSERT INTO drift_windows (window_start, window_s, tenant, model, worker, tickets,"
         " label_counts, confidence_hist) VALUES ('%s', 60, '%s', '%s', '%s', %d, '%s', '{%s}')"
         % (start, tenant, MODEL, worker, n, json.dumps(lc), ",".join(map(str, hist))))


# Each tenant: 10 reference windows on day 1 (pinned as its baseline), then test windows on day 2.
# kind -> (label proportions, confidence proportions, labels) of the test windows, and status.
shifted = BASE_P.copy()
shifted[:5] *= 6  # five labels take most of the mass
shifted /= shifted.sum()
mild = 0.9 * BASE_P + 0.1 * np.eye(20)[0]  # 10 % of traffic moves to one label
conf_low = np.array([10, 10, 10, 10, 10, 10, 10, 10, 10, 10], dtype=float) / 100
# a label the model never gave in the reference appears, two vanish
new_labels = LABELS[2:] + ["new_a", "new_b"]
newp = np.concatenate([BASE_P[2:], [0.06, 0.04]])
newp /= newp.sum()
TENANTS = {
    "same": (BASE_P, BASE_CONF, LABELS, "ok"),
    "shift": (shifted, BASE_CONF, LABELS, "drift"),
    "mild": (mild, BASE_CONF, LABELS, "watch"),
    "conf": (BASE_P, conf_low, LABELS, "drift"),
    "newgone": (newp, BASE_CONF, new_labels, "drift"),
}
ref = {}
for t, (p, c, labs, _) in TENANTS.items():
    for i in range(10):
        lc, h = window(BASE_P, BASE_CONF, 500)
        insert_window(t, "2026-01-01 10:%02d:00+00" % i, lc, h)
    for i in range(3):
        lc, h = window(p, c, 4000, labs)
        # the same window from two workers: the scores sum them
        lc2, h2 = window(p, c, 1000, labs)
        insert_window(t, "2026-01-02 10:%02d:00+00" % i, lc, h, "w1")
        insert_window(t, "2026-01-02 10:%02d:00+00" % i, lc2, h2, "w2")
    bid = psql("SELECT id FROM drift_baseline_pin_windows('%s', '%s', '2026-01-01', '2026-01-02')"
               % (t, MODEL)).strip()
    check("pin %s returns an id" % t, bid.isdigit(), bid)
# a sparse window: too few tickets for 20 labels
lc, h = window(BASE_P, BASE_CONF, 150)
insert_window("same", "2026-01-02 11:00:00+00", lc, h)

# tenant without a pinned baseline: trailing 7 days (days 1-6 before the window), one window
for d in range(1, 7):
    lc, h = window(BASE_P, BASE_CONF, 800)
    insert_window("trail", "2026-01-%02d 09:00:00+00" % d, lc, h)
lc, h = window(shifted, BASE_CONF, 3000)
insert_window("trail", "2026-01-07 09:00:00+00", lc, h)
# and one far in the past with nothing before it
lc, h = window(BASE_P, BASE_CONF, 3000)
insert_window("lonely", "2025-06-01 09:00:00+00", lc, h)

# a job baseline: ticket_results of job j1 (label and confidence per ticket)
rows = []
for i in range(3000):
    lab = LABELS[rng.choice(20, p=BASE_P)]
    conf = float(rng.choice(10, p=BASE_CONF) / 10 + rng.uniform(0, 0.1))
    rows.append("('t%05d','%s',%.6f)" % (i, lab, min(conf, 1.0)))
# a result row names its job's owner (migrations/005_tenant.sql)
psql("INSERT INTO jobs (job_id, tenant, total, done) VALUES ('j1', 'jobt', 3000, 3000)")
psql("INSERT INTO ticket_results (job_id, tenant, ticket_id, label, label_id, confidence, tokens,"
     " model) SELECT 'j1', 'jobt', v.t, v.l, 0, v.c, 10, '%s' FROM (VALUES %s) v(t, l, c)"
     % (MODEL, ",".join(rows)))
bid = psql("SELECT id FROM drift_baseline_pin_job('jobt', '%s', 'j1')" % MODEL).strip()
for i in range(3):
    lc, h = window(BASE_P, BASE_CONF, 5000)
    insert_window("jobt", "2026-01-02 10:%02d:00+00" % i, lc, h)

# what the database says and what it stored
cols = ("bucket_start, tenant, tickets, label_psi, label_js, confidence_psi, confidence_js,"
        " low_confidence_share, low_confidence_share_ref, labels_new, labels_gone, status, reference")


def scores(bucket):
    out = psql("SELECT json_agg(s) FROM (SELECT %s FROM drift_scores('%s')) s" % (cols, bucket))
    return json.loads(out)


def baseline_of(tenant):
    return json.loads(psql("SELECT row_to_json(b) FROM drift_baselines b WHERE tenant = '%s'"
                           " ORDER BY id DESC LIMIT 1" % tenant))


def stored(tenant, start=None, hour=None):
    where = "tenant = '%s'" % tenant
    where += " AND window_start = '%s'" % start if start else ""
    where += " AND date_trunc('hour', window_start) = '%s'" % hour if hour else ""
    return json.loads(psql("SELECT json_agg(json_build_object('lc', label_counts, 'h',"
                           " confidence_hist)) FROM drift_windows WHERE " + where))


def ref_scores(cur_lc, cur_h, ref_lc, ref_h):
    """PSI and JS of label mix and confidence histogram, computed independently."""
    keys = sorted(set(cur_lc) | set(ref_lc))
    out = {}
    for name, a, b in (("label", [cur_lc.get(k, 0) for k in keys], [ref_lc.get(k, 0) for k in keys]),
                       ("confidence", cur_h, ref_h)):
        p = np.asarray(a, float) / np.sum(a)
        q = np.asarray(b, float) / np.sum(b)
        ps = (p + EPS) / (1 + len(p) * EPS)
        qs = (q + EPS) / (1 + len(q) * EPS)
        out[name + "_psi"] = entropy(ps, qs) + entropy(qs, ps)
        out[name + "_js"] = jensenshannon(p, q, base=2) ** 2
    return out


def summed(rows):
    lc, h = {}, np.zeros(10)
    for r in rows:
        for k, v in r["lc"].items():
            lc[k] = lc.get(k, 0) + v
        h += np.asarray(r["h"], float)
    return lc, h


def close(a, b):
    return a is not None and abs(a - b) <= 1e-9 + 1e-7 * abs(b)


def compare(tag, s, cur_lc, cur_h, ref_lc, ref_h):
    want = ref_scores(cur_lc, cur_h, ref_lc, ref_h)
    for k, v in want.items():
        check("%s %s = %.6f" % (tag, k, v), close(s[k], v), "database says %r" % s[k])
    lo = float(np.sum(cur_h[:5]) / np.sum(cur_h))
    check("%s low_confidence_share" % tag, close(s["low_confidence_share"], lo),
          "%r vs %r" % (s["low_confidence_share"], lo))
    lo_ref = float(np.sum(ref_h[:5]) / np.sum(ref_h))
    check("%s low_confidence_share_ref" % tag, close(s["low_confidence_share_ref"], lo_ref),
          "%r vs %r" % (s["low_confidence_share_ref"], lo_ref))
    n, nref = sum(cur_h), sum(ref_h)
    new = sorted(k for k in cur_lc if k not in ref_lc)
    gone = sorted(k for k, v in ref_lc.items() if v / nref * n >= 5 and k not in cur_lc)
    check("%s labels_new" % tag, s["labels_new"] == new, "%r vs %r" % (s["labels_new"], new))
    check("%s labels_gone" % tag, s["labels_gone"] == gone, "%r vs %r" % (s["labels_gone"], gone))


win = scores("window")
by = {}
for s in win:
    by.setdefault(s["tenant"], []).append(s)
for t, (_, _, _, want_status) in TENANTS.items():
    b = baseline_of(t)
    ref_lc, ref_h = b["label_counts"], np.asarray(b["confidence_hist"], float)
    blc, bh = summed(json.loads(psql(
        "SELECT json_agg(json_build_object('lc', label_counts, 'h', confidence_hist)) FROM"
        " drift_windows WHERE tenant = '%s' AND window_start < '2026-01-02'" % t)))
    check("%s baseline = the day-1 windows summed" % t, blc == ref_lc and list(bh) == list(ref_h))
    day2 = [s for s in by[t] if s["bucket_start"].startswith("2026-01-02T10")]
    check("%s has 3 scored windows" % t, len(day2) == 3, str(len(day2)))
    for s in day2:
        cur_lc, cur_h = summed(stored(t, s["bucket_start"]))
        compare("%s %s" % (t, s["bucket_start"][11:16]), s, cur_lc, cur_h, ref_lc, ref_h)
        check("%s %s status %s" % (t, s["bucket_start"][11:16], want_status),
              s["status"] == want_status, "%s (label_psi %.4f, confidence_psi %.4f)"
              % (s["status"], s["label_psi"], s["confidence_psi"]))
        check("%s reference names the pinned baseline" % t, s["reference"].startswith("baseline "),
              s["reference"])
sp = [s for s in by["same"] if s["bucket_start"].startswith("2026-01-02T11")]
check("150 tickets over 20 labels read sparse", len(sp) == 1 and sp[0]["status"] == "sparse",
      str(sp))

# trailing reference: the six earlier windows
tr = [s for s in by["trail"] if s["bucket_start"].startswith("2026-01-07")][0]
rows = json.loads(psql("SELECT json_agg(json_build_object('lc', label_counts, 'h', confidence_hist))"
                       " FROM drift_windows WHERE tenant = 'trail' AND window_start < '2026-01-07'"))
ref_lc, ref_h = summed(rows)
cur_lc, cur_h = summed(stored("trail", tr["bucket_start"]))
compare("trail", tr, cur_lc, cur_h, ref_lc, ref_h)
check("trail says trailing 7 days", tr["reference"] == "trailing 7 days", tr["reference"])
check("trail shifted reads drift", tr["status"] == "drift", tr["status"])
lonely = by["lonely"][0]
check("nothing to compare with reads no_baseline", lonely["status"] == "no_baseline"
      and lonely["reference"] == "none", str(lonely))
check("no reference lists no new or gone labels", lonely["labels_new"] == [] and lonely["labels_gone"] == [],
      str(lonely))

# job baseline: exact counts from ticket_results
b = baseline_of("jobt")
want_lc = json.loads(psql("SELECT json_object_agg(label, n) FROM (SELECT label, count(*) n FROM"
                          " ticket_results WHERE job_id = 'j1' GROUP BY label) x"))
confs = np.array([float(x) for x in psql("SELECT confidence FROM ticket_results WHERE job_id = 'j1'"
                                         ).split()])
want_h = np.bincount(np.minimum((confs * 10).astype(int), 9), minlength=10)
check("job baseline label counts", b["label_counts"] == want_lc)
check("job baseline histogram", list(b["confidence_hist"]) == list(want_h),
      "%r vs %r" % (b["confidence_hist"], list(want_h)))
check("job baseline source", b["source"] == "job" and b["source_job"] == "j1" and b["tickets"] == 3000)
for s in by["jobt"]:
    cur_lc, cur_h = summed(stored("jobt", s["bucket_start"]))
    compare("jobt " + s["bucket_start"][11:16], s, cur_lc, cur_h, b["label_counts"],
            np.asarray(b["confidence_hist"], float))
    check("jobt resample of the job reads ok", s["status"] == "ok", s["status"])

# hour roll-up: the three day-2 windows of 'shift' summed
hr = [s for s in scores("hour") if s["tenant"] == "shift" and s["bucket_start"].startswith("2026-01-02T10")]
check("hour roll-up has one row", len(hr) == 1, str(len(hr)))
cur_lc, cur_h = summed(stored("shift", hour="2026-01-02 10:00+00"))
b = baseline_of("shift")
compare("shift hour", hr[0], cur_lc, cur_h, b["label_counts"], np.asarray(b["confidence_hist"], float))
check("shift hour tickets", hr[0]["tickets"] == 15000, str(hr[0]["tickets"]))

# bad input
r = subprocess.run(["psql", DB, "-qtAX", "-c", "SELECT * FROM drift_scores('week')"],
                   capture_output=True, text=True)
check("unknown bucket refused, naming the choices", r.returncode != 0 and "window, hour or day" in r.stderr,
      r.stderr)
r = subprocess.run(["psql", DB, "-qtAX", "-c", "SELECT drift_baseline_pin_job('x', 'm1', 'nojob')"],
                   capture_output=True, text=True)
check("pinning an unknown job is refused", r.returncode != 0 and "has no tickets" in r.stderr, r.stderr)

print("drift_scores_check: %d failed" % len(failures))
sys.exit(1 if failures else 0)
