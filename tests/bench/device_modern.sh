# The "modern" stage of tests/bench/device_run.sh (sourced by it: $B, $OUT, $summary, note,
# elapsed, step): ModernBERT-base and DeBERTa-v3-base on the CUDA encoder graph against PyTorch, in
# one device call of MODERN_BUDGET_S (540) seconds, each step's timeout cut to what is left.
# MODERN_PARTS (a comma list, all by default) runs a subset:
#   ops      test_graph_ops: every op variant x precision, cuda against tests/lib's references
#   kernels  test_gpu_kernels: RoPE (its table), sliding window on mma.sync and wgmma, c2p+p2c,
#            GeGLU, mean pool, BERT's kernels
#   golden   test_gpu_golden modernbert deberta: the two fixtures, fp16 and bf16
#   profile  reclass bench --profile-ops, fp16, budget 16384: modernbert-base, then bert-base
#            (per-op device time; the timed passes before it are modernbert-base's speed row)
#   speed    reclass bench deberta-v3-base fp16 16384; then torch_gpu_peer.py on the same
#            tickets at 16384: modernbert-base varlen (torch's own varlen attention, no
#            padding), compile, varlen-compile, eager, then deberta-v3-base compile, eager
# What to read: $OUT/summary.txt; modern-*.log for the whole output.
# the steps run under device_run.sh's step, capped by this stage's budget
budget_s=${MODERN_BUDGET_S:-540}
mparts=",${MODERN_PARTS:-ops,kernels,golden,profile,speed},"
mpart() { [[ $mparts == *",$1,"* ]]; }
# rbench GEOMETRY LOG [ARGS...]: reclass bench on tickets-mix, fp16, budget 16384; the speed line
rbench() {
    local g=$1 log=$2
    shift 2
    step 90 "$log" $B/reclass bench --geometry "$g" --labels 140 --backend cuda \
        --workload tickets-mix --token-budget 16384 --precision fp16 --repeat 3 "$@"
    grep -E "^throughput|GEMM ceiling" "$log" | sed "s/^/  $g: /" | tee -a "$summary"
}

if mpart ops; then
    note "modern: test_graph_ops ($(elapsed)s)"
    step 60 "$OUT/modern-ops.log" $B/tests/test_graph_ops
    grep -E " cuda +|rows run|FAIL" "$OUT/modern-ops.log" | grep -E "attention|rope|window|FAIL|rows run" |
        tail -30 | tee -a "$summary"
fi
if mpart kernels; then
    note "modern: test_gpu_kernels ($(elapsed)s)"
    step 150 "$OUT/modern-kernels.log" $B/tests/test_gpu_kernels
    grep -E "^FAIL|PASSED|FAILED|rope|window" "$OUT/modern-kernels.log" | tail -30 | tee -a "$summary"
fi
if mpart golden; then
    note "modern: test_gpu_golden modernbert deberta ($(elapsed)s)"
    step 90 "$OUT/modern-golden.log" $B/tests/test_gpu_golden modernbert deberta
    grep -E "^(ok|FAIL)|PASSED|FAILED" "$OUT/modern-golden.log" | tail -12 | tee -a "$summary"
fi
if mpart profile; then
    for g in modernbert-base bert-base; do
        note "modern: reclass bench --profile-ops $g fp16 16384 ($(elapsed)s)"
        rbench "$g" "$OUT/modern-profile-$g.log" --profile-ops
        # the per-op table: its header line, the rows, the total
        sed -n '/^per-op time/,/^  total/p' "$OUT/modern-profile-$g.log" | tee -a "$summary"
    done
fi
if mpart speed; then
    note "modern: reclass bench deberta-v3-base fp16 16384 ($(elapsed)s)"
    rbench deberta-v3-base "$OUT/modern-bench-deberta.log"
    [ -f /tmp/tickets_mix.jsonl ] || timeout 60 $B/tests/gpu_bench --budgets 16384 --repeat 1 \
        --workload-out /tmp/tickets_mix.jsonl >/dev/null 2>&1
    export PYTHONUNBUFFERED=1
    # the unpadded peer first; each variant's JSON line is out before
    # the next starts, so a cut step keeps the lines before it
    for g in modernbert-base:varlen,compile,varlen-compile,eager deberta-v3-base:compile,eager; do
        note "modern: torch ${g%%:*} ${g#*:} ($(elapsed)s)"
        step 240 "$OUT/modern-torch-${g%%:*}.log" python3 \
            tests/bench/torch_gpu_peer.py /tmp/tickets_mix.jsonl --geometry "${g%%:*}" \
            --variants "${g#*:}" --budgets 16384 --repeat 2 --compile-budget-s 150
        grep -E '^\{|skip|Error|logit delta' "$OUT/modern-torch-${g%%:*}.log" | tee -a "$summary"
    done
fi
unset budget_s
