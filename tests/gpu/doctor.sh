#!/usr/bin/env bash
# GPU check for `gdunlock doctor` / `gdunlock topo` on the accelerator machine.
# Compares doctor's live findings with nvidia-smi (driver version, BAR1 size,
# memory, PCIe link), checks the cuFile 5027 prediction for the ext4 root on
# the virtio disk, captures the machine (--capture, tarred into $OUT) and
# replays the capture. Prints PASS/FAIL/SKIP lines; logs and outputs in $OUT.
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/gdu-gpu-out}
GDU="$BUILD/bin/gdunlock"
D="$OUT/doctor"
mkdir -p "$D"

if [ ! -x "$GDU" ]; then
  echo "FAIL doctor-binary: $GDU missing (build first)"
  exit 0
fi
if ! command -v nvidia-smi >/dev/null; then
  echo "SKIP doctor: nvidia-smi not found (no NVIDIA driver here)"
  exit 0
fi

# 1. doctor runs, human and JSON.
"$GDU" doctor >"$D/doctor.txt" 2>"$D/doctor.err"
rc=$?
case $rc in
  0|10|11|12|13) echo "PASS doctor-runs: exit $rc, verdict: $(grep -m1 'GPUDirect Storage' "$D/doctor.txt" | sed 's/^ *//')" ;;
  *) echo "FAIL doctor-runs: exit $rc ($(head -c 300 "$D/doctor.err"))" ;;
esac
"$GDU" doctor --json >"$D/doctor.json" 2>>"$D/doctor.err"
rc_json=$?
# A verdict's exit status (0, 10-13), the same as the human run's, and the
# document's own exit_code; anything else (70, a crash) fails.
python3 - "$D/doctor.json" "$rc_json" "$rc" <<'PY'
import json, sys
rc_json, rc = int(sys.argv[2]), int(sys.argv[3])
try:
    code = json.load(open(sys.argv[1])).get("exit_code")
except Exception as e:
    print("FAIL doctor-json: not valid JSON (exit %d): %s" % (rc_json, e)); sys.exit(0)
if rc_json in (0, 10, 11, 12, 13) and rc_json == rc and code == rc_json:
    print("PASS doctor-json: valid JSON, exit %d = exit_code %s = the human run's" % (rc_json, code))
else:
    print("FAIL doctor-json: exit %d, exit_code %s, human run %d (expected one verdict status 0, 10-13 in all three)" % (rc_json, code, rc))
PY

# 2. Live findings against nvidia-smi.
nvidia-smi -q >"$D/nvidia-smi-q.txt" 2>&1
nvidia-smi --query-gpu=pci.bus_id,driver_version,memory.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max \
  --format=csv,noheader,nounits >"$D/nvidia-smi-query.csv" 2>&1
nvidia-smi topo -m >"$D/nvidia-smi-topo.txt" 2>&1
python3 - "$D/doctor.json" "$D/nvidia-smi-query.csv" "$D/nvidia-smi-q.txt" <<'PY'
import json, re, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL doctor-vs-nvidia-smi: doctor --json unreadable: %s" % e); sys.exit(0)
rows = [r.split(", ") for r in open(sys.argv[2]).read().strip().splitlines()]
q = open(sys.argv[3]).read()
# BAR1 totals in nvidia-smi -q order (one "BAR1 Memory Usage" block per GPU, each with Total)
bar1 = [int(m) for m in re.findall(r"BAR1 Memory Usage\s*\n\s*Total\s*:\s*(\d+) MiB", q)]
free = [int(m) for m in re.findall(r"BAR1 Memory Usage\s*\n(?:\s*\w+\s*:.*\n)*?\s*Free\s*:\s*(\d+) MiB", q)]
bus = [b.strip() for b in re.findall(r"^GPU ([0-9A-Fa-f:.]+)\s*$", q, re.M)]
def norm(b):
    d, rest = b.lower().split(":", 1)
    return "%04x:%s" % (int(d, 16), rest)
gpus = {g["pci"]: g for g in doc["gpus"]}
drv = rows[0][1].strip() if rows and len(rows[0]) > 1 else "?"
if doc["driver"]["version"] == drv:
    print("PASS doctor-driver-version: doctor %s = nvidia-smi %s (open module: %s)" % (doc["driver"]["version"], drv, doc["driver"]["open_module"]))
else:
    print("FAIL doctor-driver-version: doctor %r, nvidia-smi %r" % (doc["driver"]["version"], drv))
for i, row in enumerate(rows):
    if len(row) < 7:
        print("SKIP doctor-gpu-%d: nvidia-smi row %r" % (i, row)); continue
    b = norm(row[0].strip())
    g = gpus.get(b)
    if g is None:
        print("FAIL doctor-gpu-%s: doctor does not list it (doctor has %s)" % (b, sorted(gpus))); continue
    smi_bar1 = None
    if b in [norm(x) for x in bus]:
        k = [norm(x) for x in bus].index(b)
        smi_bar1 = bar1[k] if k < len(bar1) else None
    mib = g["bar1_bytes"] >> 20
    if smi_bar1 is None:
        print("SKIP doctor-bar1-%s: nvidia-smi -q has no BAR1 total (doctor: %d MiB)" % (b, mib))
    elif smi_bar1 == mib:
        print("PASS doctor-bar1-%s: %d MiB in both" % (b, mib))
    else:
        print("FAIL doctor-bar1-%s: doctor %d MiB, nvidia-smi %d MiB" % (b, mib, smi_bar1))
    # BAR1 as RM counts it (NV2080_CTRL_CMD_FB_GET_INFO_V2): the same total as
    # nvidia-smi's, and an unused part no larger than it (doctor's own CUDA
    # context maps a little of it while it asks).
    rm_total, rm_avail = g.get("rm_bar1_bytes", 0) >> 20, g.get("rm_bar1_available_bytes", 0) >> 20
    smi_free = None
    if b in [norm(x) for x in bus]:
        k = [norm(x) for x in bus].index(b)
        smi_free = free[k] if k < len(free) else None
    if rm_total and smi_bar1 == rm_total and 0 < rm_avail <= rm_total:
        print("PASS doctor-rm-bar1-%s: RM %d MiB, %d MiB unused; nvidia-smi Total %d MiB, Free %s MiB" % (b, rm_total, rm_avail, smi_bar1, smi_free))
    else:
        print("FAIL doctor-rm-bar1-%s: RM %d MiB, %d MiB unused; nvidia-smi Total %s MiB, Free %s MiB" % (b, rm_total, rm_avail, smi_bar1, smi_free))
    mem = g["memory_bytes"] >> 20
    smi_mem = int(row[2])
    if mem and abs(mem - smi_mem) <= max(smi_mem // 100, 1024):
        print("PASS doctor-memory-%s: doctor %d MiB (cuDeviceTotalMem), nvidia-smi %d MiB" % (b, mem, smi_mem))
    else:
        print("FAIL doctor-memory-%s: doctor %d MiB, nvidia-smi %d MiB" % (b, mem, smi_mem))
    l = g["link"]
    ev = "doctor Gen%d x%d (max Gen%d x%d), nvidia-smi Gen%s x%s (max Gen%s x%s)" % (
        l["cur_gen"], l["cur_width"], l["max_gen"], l["max_width"], row[3], row[5], row[4], row[6])
    # the current generation moves with power state between the two reads; width does not
    if str(l["cur_width"]) == row[5].strip() and str(l["max_width"]) == row[6].strip():
        print("PASS doctor-link-%s: %s" % (b, ev))
    else:
        print("FAIL doctor-link-%s: %s" % (b, ev))
pairs = doc["p2p"]
if len(doc["gpus"]) >= 2:
    v = ", ".join("GPU%d<->GPU%d %s (%s)" % (p["gpu_a"], p["gpu_b"], p["verdict"]["class"], p["verdict"]["cause"]) for p in pairs)
    ok = pairs and all(p["verdict"]["class"] == "NVLink" for p in pairs)
    print("%s doctor-p2p: %s" % ("PASS" if ok else "FAIL", v or "no pairs"))
else:
    print("SKIP doctor-p2p: one GPU")
PY

# cuFile's P2PDMA route on the H200 machine: its kernel lacks CONFIG_PCI_P2PDMA
# (the issue's reading of the machine), which doctor must name, with the path
# cuFile takes; RM's static BAR1 answer is printed for the record.
python3 - "$D/doctor.json" <<'PY'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL doctor-p2pdma: doctor --json unreadable: %s" % e); sys.exit(0)
f = {x["id"]: x for x in doc["findings"]}
k = f.get("p2pdma.kernel_config", {})
gpu = {i: f.get("p2pdma.gpu0.%s" % i, {}) for i in ("static_bar1", "write_combining")}
line = "%s; direct path %s (%s); static BAR1 %s / %s" % (
    " | ".join(k.get("evidence", [])), doc["gds"].get("direct_path"), doc["gds"].get("direct_path_why"),
    " | ".join(gpu["static_bar1"].get("evidence", [])), " | ".join(gpu["write_combining"].get("evidence", [])))
if k.get("status") == "fail" and "CONFIG_PCI_P2PDMA" in k.get("title", "") and doc["gds"].get("direct_path") in ("nvidia-fs", "none"):
    print("PASS doctor-p2pdma: names the kernel's missing P2PDMA: %s" % line)
else:
    print("FAIL doctor-p2pdma: kernel_config %s: %s" % (k.get("status"), line))
PY

# libcufile's version as doctor reports it against the library file's name.
lib=$(python3 -c 'import json,sys; f={x["id"]:x for x in json.load(open(sys.argv[1]))["findings"]}; c=f.get("cufile.library",{}); print(" ".join(c.get("evidence",[])).replace("loaded from ",""), "|", c.get("title",""))' "$D/doctor.json" 2>/dev/null)
lib_path=${lib%% |*}
if [ -n "$lib_path" ] && [ -e "$lib_path" ]; then
  real=$(basename "$(readlink -f "$lib_path")")
  if [[ "$real" == *"${lib##*libcufile }"* ]]; then
    echo "PASS doctor-cufile-version: ${lib##*| } matches $real"
  else
    echo "FAIL doctor-cufile-version: doctor says '${lib##*| }', the library file is $real"
  fi
else
  echo "SKIP doctor-cufile-version: doctor found no libcufile ($lib)"
fi

# 3. The ext4 root on a virtio disk: cuFile's 5027 (no udev ID_FS_USAGE), not NVMe.
"$GDU" doctor --json /root >"$D/doctor-root.json" 2>>"$D/doctor.err"
rc=$?
python3 - "$D/doctor-root.json" "$rc" <<'PY'
import json, sys
rc = int(sys.argv[2])
try:
    doc = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL doctor-root-5027: doctor --json /root unreadable (exit %d): %s" % (rc, e)); sys.exit(0)
f = {x["id"]: x for x in doc["findings"]}
reasons = " | ".join(r["text"] for r in doc["gds"]["reasons"])
udev = f.get("storage.udev", {}); block = f.get("storage.block", {})
if doc["gds"]["verdict"] == "impossible" and rc == 12 and "5027" in reasons and udev.get("status") == "fail":
    print("PASS doctor-root-5027: exit 12, %s" % reasons)
else:
    print("FAIL doctor-root-5027: exit %d, verdict %s, udev %s, reasons: %s" % (rc, doc["gds"]["verdict"], udev.get("status"), reasons))
if block.get("status") == "fail" and "not NVMe" in " ".join(block.get("evidence", [])):
    print("PASS doctor-root-not-nvme: %s; %s" % (block["title"], "; ".join(block["evidence"])))
else:
    print("FAIL doctor-root-not-nvme: %s" % block)
PY
"$GDU" doctor /root >"$D/doctor-root.txt" 2>&1

# 4. topo against nvidia-smi topo -m.
"$GDU" topo >"$D/topo.txt" 2>&1
rc=$?
"$GDU" topo --json >"$D/topo.json" 2>&1
if [ $rc -eq 0 ]; then
  smi_nv=$(grep -c 'NV[0-9]' "$D/nvidia-smi-topo.txt")
  ours_nv=$(grep -c ' NV ' "$D/topo.txt")
  if [ "$smi_nv" -gt 0 ] && [ "$ours_nv" -eq 0 ]; then
    echo "FAIL doctor-topo: nvidia-smi shows NVLink, topo does not: $(head -3 "$D/topo.txt" | tr '\n' '|')"
  else
    echo "PASS doctor-topo: $(head -3 "$D/topo.txt" | tr '\n' '|') (nvidia-smi NV rows: $smi_nv)"
  fi
else
  echo "FAIL doctor-topo: exit $rc: $(head -c 300 "$D/topo.txt")"
fi

# 5. Capture and replay.
rm -rf "$OUT/h200-capture"
"$GDU" doctor --capture "$OUT/h200-capture" /root >"$D/capture-run.txt" 2>"$D/capture.err"
tar czf "$OUT/h200-capture.tar.gz" -C "$OUT" h200-capture 2>>"$D/capture.err"
"$GDU" doctor --json --sysroot "$OUT/h200-capture" /root >"$D/replay-root.json" 2>>"$D/capture.err"
python3 - "$D/doctor-root.json" "$D/replay-root.json" "$D/capture.err" <<'PY'
import json, sys
try:
    a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
except Exception as e:
    err = open(sys.argv[3]).read().strip()[-400:].replace("\n", " | ")
    print("FAIL doctor-capture-replay: %s; %s" % (e, err)); sys.exit(0)
def key(d):
    return (d["gds"]["verdict"], tuple((p["gpu_a"], p["gpu_b"], p["verdict"]["class"]) for p in d["p2p"]),
            tuple((g["pci"], g["bar1_bytes"], g["memory_bytes"]) for g in d["gpus"]))
stats = open(sys.argv[3]).read().strip().splitlines()
if key(a) == key(b):
    print("PASS doctor-capture-replay: same verdicts and GPUs from the capture; %s" % (stats[-1] if stats else ""))
else:
    print("FAIL doctor-capture-replay: live %s, replay %s" % (key(a), key(b)))
PY
rm -rf "$OUT/h200-capture"
# The listing goes to a variable first: with pipefail, grep -q closing the pipe
# early made tar's SIGPIPE fail the check although the file was there.
listing=$(tar tzf "$OUT/h200-capture.tar.gz" 2>/dev/null)
if grep -q 'gdunlock-live.json$' <<<"$listing"; then
  echo "PASS doctor-capture-tar: $OUT/h200-capture.tar.gz ($(tar tzf "$OUT/h200-capture.tar.gz" | wc -l) entries, $(stat -c %s "$OUT/h200-capture.tar.gz") bytes)"
else
  echo "FAIL doctor-capture-tar: no archive with gdunlock-live.json ($(tail -c 300 "$D/capture.err" | tr '\n' ' '))"
fi
exit 0
