#!/usr/bin/env bash
# Every GPU measurement in one prepared run, for a GPU machine without a network (and with a
# python3 with torch, transformers and sentence-transformers; no install of this project):
#
#     OUT=/some/folder bash benchmarks/gpu_checks.sh      # from the repository's root
#
# Steps, most wanted first, each under its own time limit and all under GPU_CHECKS_BUDGET
# seconds (default 540): a step that would start past the budget is skipped and says so.
#   env          the card, driver, CPU and package versions; builds the _kernels extension in place
#   magnitude    device_check.py --only magnitude (torch path against the NumPy engine)
#   bench_gpu    bench_gpu.py at the target sizes (10,000 and 50,000 points, batches) and the
#                device's large-n path at 50,000 points against the dense one
#   bench_gpu_d2 the same single and batch jobs with MagArea by hermite_d2 (NumPy engine up to
#                2,000 points: from 500 on its conjugate gradients make the rule slow there)
#   cores        the NumPy engine's t_conv + MagArea at 10,000 points on 2, 4, 8, 16 host cores
#   sentences, inception, lm   device_check.py's encoder checks (random weights, see its doc)
#   large100k    the device's large-n path at 100,000 points (dense would need 224 GiB)
#   host_large   bench_large.py (the host's large-n path) at 10,000 and 30,000 points, 16 cores
#   host_large_2 bench_large.py at 10,000 points on 2 cores (the 16-core figure's baseline)
#   portability  a trained model on the GPU: all-MiniLM-L6-v2 carried in two parts to
#                .gpu_carry/minilm (benchmarks/gpu_carry.py; docs/gpu.md says how), joined and
#                checked, then embedding_portability.py's native (this host's CPU), cuda and
#                cuda_again on 2,000 documents of each of $PORTABILITY_COLLECTIONS (default
#                fortunes jargon); the GPU's vectors come back as $OUT/cuda_<collection>.npy.
#                Skipped when nothing was carried.
# GPU_CHECKS_STEPS="bench_gpu host_large" runs only the steps named (a rerun of what failed).
# Everything is written to $OUT/checks.log and, after each step, packed into $OUT/results.tar
# (the JSON files), so a run stopped at its limit still returns what it finished.
set -u
OUT=${OUT:-gpu_checks_out}
WORK=$(mktemp -d)
export OUT WORK
BUDGET=${GPU_CHECKS_BUDGET:-540}
START=$(date +%s)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
exec > >(tee -a "$OUT/checks.log") 2>&1

step() {  # step NAME LIMIT_S COMMAND...
    local name=$1 limit=$2 left began rc
    shift 2
    if [ -n "${GPU_CHECKS_STEPS:-}" ] && [[ " $GPU_CHECKS_STEPS " != *" $name "* ]]; then
        return
    fi
    left=$((BUDGET - ($(date +%s) - START)))
    if [ "$left" -lt 20 ]; then
        echo "## $name: skipped, ${left} s of the budget left"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "## $name (limit ${limit} s): $*"
    began=$(date +%s)
    timeout -k 5 "$limit" bash -c '"$@"' "$name" "$@"
    rc=$?
    echo "## $name: exit $rc after $(($(date +%s) - began)) s"
    tar -cf "$OUT/results.tar" -C "$WORK" .
}

environment() {
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
    lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket)'
    python3 -c 'import sys, numpy, scipy, torch, transformers, sentence_transformers as st
print(sys.version.split()[0], "numpy", numpy.__version__, "scipy", scipy.__version__,
      "torch", torch.__version__, "transformers", transformers.__version__,
      "sentence-transformers", st.__version__, "threads", torch.get_num_threads())'
    python3 setup.py -q build_ext --inplace 2>&1 | tail -3
    python3 -c 'import diversity_core.magnitude as m; print("exponential:", m.EXPONENTIAL)'
}

portability() {
    local vectors c
    vectors=$(mktemp -d)  # every variant's vectors; only the GPU's go to $OUT (its size limits)
    python3 benchmarks/gpu_carry.py join .gpu_carry/minilm || return 1
    for c in ${PORTABILITY_COLLECTIONS:-fortunes jargon}; do
        python3 benchmarks/embedding_portability.py all-MiniLM-L6-v2 \
            resources/text/models/all-MiniLM-L6-v2 "results/models/interim/documents/$c.json" \
            --n 2000 --variants native,cuda,cuda_again --json "$WORK/portability_$c.json" \
            --save "$vectors/$c" || return 1
        cp "$vectors/$c/cuda.npy" "$OUT/cuda_$c.npy"
    done
}

export -f environment portability
step env 60 environment
step magnitude 90 python3 benchmarks/device_check.py --only magnitude --json "$WORK/magnitude.json"
step bench_gpu 240 python3 benchmarks/bench_gpu.py --large 50000 --json "$WORK/bench_gpu.json"
step bench_gpu_d2 150 python3 benchmarks/bench_gpu.py --integration hermite_d2 --numpy-max 2000 \
    --json "$WORK/bench_gpu_d2.json"
if [ -f .gpu_carry/minilm/manifest.json ]; then
    step portability 300 portability
elif [ -z "${GPU_CHECKS_STEPS:-}" ] || [[ " $GPU_CHECKS_STEPS " == *" portability "* ]]; then
    echo "## portability: skipped, no model carried to .gpu_carry/minilm"
fi
step cores 150 python3 benchmarks/bench_gpu.py --only-extra --numpy-cores 2,4,8,16 \
    --json "$WORK/cores.json"
for check in sentences inception lm; do
    step "$check" 70 python3 benchmarks/device_check.py --only "$check" --json "$WORK/$check.json"
done
step large100k 120 python3 benchmarks/bench_gpu.py --only-extra --large 100000 \
    --json "$WORK/large100k.json"
step host_large 150 python3 benchmarks/bench_large.py --sizes 10000,30000 --cores 16 \
    --json "$WORK/host_large.json"
step host_large_2 90 python3 benchmarks/bench_large.py --sizes 10000 --cores 2 \
    --json "$WORK/host_large_2.json"
echo "## done after $(($(date +%s) - START)) s"
