# The "fp8" stage of tests/bench/device_run.sh (sourced by it: $B, $OUT, $summary, note,
# elapsed, step, cap): FP8 in one device call.
#   tests/bench/device_run.sh run fp8
#       fp8      FP8 in one call (FP8_BUDGET_S, 570 by default; steps capped as
#                the graph stage's): FP8_PARTS, a comma list, default kernels,ops,speed:
#                kernels  test_gpu_fp8: weight, activation and LayerNorm codes and scales bit
#                         for bit against the CPU reference (gpu/model/fp8.h), the FP8 GEMMs
#                         (tuned warm-up, cached) against the fp32 product of the same codes, a
#                         12-layer model against the CPU fp8 reference, the demo checkpoint's
#                         goldens at fp8 (CLINC150 >= 99.5%, long CFPB >= 99.0%); then
#                         `test_gpu_fp8 bench` (FP8 vs fp16 GEMMs at bert-base shapes)
#                ops      test_graph_ops (its cuda fp8 rows: every linear epilogue, norm then
#                         linear, the fused LayerNorm)
#                speed    reclass bench --geometry bert-base fp16 and fp8 (tickets-mix, token
#                         budgets FP8_BUDGETS ("16384 65536"), FP8_ROUNDS (1) interleaved), then
#                         torch_gpu_peer.py compile bf16 on the same workload and budgets
#                plans    test_gpu_fp8 plans: bert-base per set of FP8 points beside fp16
#                agree    a BERT-base-geometry CLINC150 classifier trained here
#                         (fp8_agreement.py, FP8_EPOCHS 3; needs FP8_DATA, default .devdata,
#                         holding clinc150/ and cfpb_complaints/ of the shared data folder: here
#                         `mkdir -p .devdata && cp -r ../shared/data/clinc150
#                         ../shared/data/cfpb_complaints .devdata/`, in .git/info/exclude,
#                         carried); agreement with HF fp32 of reclass cuda fp16 / fp8 and the
#                         CPU fp8 reference (FP8_AGREE_CPU=0: without it; on the host's cores it
#                         takes minutes) on CLINC150 test and long CFPB narratives
#                sens     tests/bench/fp8_sensitivity (the C reference, the host's cores) on
#                         that classifier per plan of FP8_SENS_PLANS ("plan inner:ff1
#                         inner:ao+ff2"; plan syntax in the tool), against its HF fp32 goldens
#                recipes  fp8_recipes.py's simulation of FP8_RECIPES on that classifier (default
#                         the plan without and with FFN-out per layer range, 10,15-21)
#                The kernels part reads the demo goldens: carry .devlibs/fix.tar.xz
#                (pack-fixtures) and start with `tar -xJf .devlibs/fix.tar.xz &&`.
# FP8_PARTS picks parts; the default (kernels,ops,speed) is one call of about 7 minutes.
fp8_parts=",${FP8_PARTS:-kernels,ops,speed},"
fpart() { [[ $fp8_parts == *",$1,"* ]]; }
D=/tmp/fp8run
if fpart kernels; then
    note "fp8: test_gpu_fp8 ($(elapsed)s)"
    step 150 "$OUT/fp8-kernels.log" $B/tests/test_gpu_fp8
    grep -E "^(ok|FAIL)|fp8 (clinc|cfpb)|electra|PASSED|FAILED" "$OUT/fp8-kernels.log" | tee -a "$summary"
    step 60 "$OUT/fp8-gemm-bench.log" $B/tests/test_gpu_fp8 bench
    grep -E "TFLOP|FAIL" "$OUT/fp8-gemm-bench.log" | tee -a "$summary"
fi
if fpart ops; then
    note "fp8: test_graph_ops ($(elapsed)s)"
    step 60 "$OUT/fp8-ops.log" $B/tests/test_graph_ops
    grep -E "fp8|rows run|FAIL" "$OUT/fp8-ops.log" | grep -E " cuda |rows run|FAIL" | tail -30 | tee -a "$summary"
fi
if fpart speed; then
    # reclass bench bert-base fp16 and fp8 interleaved (FP8_ROUNDS, 1; a second round runs in
    # the other order), then torch.compile bf16 on the same tickets-mix workload
    [ -f /tmp/tickets_mix.jsonl ] || $B/tests/gpu_bench --budgets 16384 --repeat 1 --workload-out /tmp/tickets_mix.jsonl >/dev/null
    for round in $(seq 1 "${FP8_ROUNDS:-1}"); do
        precs="fp16 fp8"
        [ $((round % 2)) -eq 0 ] && precs="fp8 fp16"
        for tb in ${FP8_BUDGETS:-16384 65536}; do
            for p in $precs; do
                note "fp8: bench bert-base $p $tb round $round ($(elapsed)s)"
                step 60 "$OUT/fp8-bench-$p-$tb-$round.log" $B/reclass bench --geometry bert-base \
                    --labels 140 --backend cuda --workload tickets-mix --token-budget $tb \
                    --precision $p --repeat 3
                echo "reclass $p $tb round $round: $(tail -2 "$OUT/fp8-bench-$p-$tb-$round.log" | head -1)" |
                    tee -a "$OUT/fp8-speed.log" | tee -a "$summary"
            done
        done
    done
    grep -m1 "fp8 plan" "$OUT"/fp8-bench-fp8-*.log | tee -a "$summary"
    note "fp8: torch.compile bf16 ($(elapsed)s)"
    PYTHONUNBUFFERED=1 step ${TORCH_COMPILE_TIMEOUT:-300} "$OUT/fp8-torch.log" python3 tests/bench/torch_gpu_peer.py \
        /tmp/tickets_mix.jsonl --dtype bf16 --variants compile --budgets "$(echo ${FP8_BUDGETS:-16384 65536} | tr ' ' ,)" --repeat 3
    grep -E '^\{|skip|Error' "$OUT/fp8-torch.log" | tee -a "$OUT/fp8-speed.log" | tee -a "$summary"
fi
if { fpart agree || fpart recipes || fpart sens; } && [ ! -f $D/model/config.json ]; then
    note "fp8: train BERT-base CLINC150 classifier ($(elapsed)s)"
    PYTHONUNBUFFERED=1 step 300 "$OUT/fp8-train.log" python3 tests/bench/fp8_agreement.py train $D \
        --data "${FP8_DATA:-.devdata}" --epochs ${FP8_EPOCHS:-3}
    grep -v -E 'Warning|warn' "$OUT/fp8-train.log" | tail -12 | tee -a "$summary"
fi
if fpart agree; then # the C reference on this classifier runs on the host's cores
    outs=()
    for s in clinc_test cfpb_long; do
        for p in fp16 fp8; do
            $B/reclass classify --model $D/model --jsonl --backend cuda --precision $p --token-budget 16384 \
                <$D/$s.jsonl >$D/cuda-$p-$s.out 2>>"$OUT/fp8-classify.err"
            outs+=("reclass cuda $p=$D/cuda-$p-$s.out")
        done
        [ "${FP8_AGREE_CPU:-1}" = 1 ] || continue
        step 240 "$OUT/fp8-cpu-$s.log" sh -c "$B/reclass classify --model $D/model --jsonl --backend cpu \
            --precision fp8 <$D/$s.jsonl >$D/cpu-fp8-$s.out"
        outs+=("reclass cpu fp8 (reference)=$D/cpu-fp8-$s.out")
    done
    note "fp8 agreement with HF fp32 ($(elapsed)s)"
    python3 tests/bench/fp8_agreement.py compare $D "${outs[@]}" 2>&1 | tee "$OUT/fp8-agreement.log" | tee -a "$summary"
    grep -m1 "fp8 plan" "$OUT/fp8-classify.err" | tee -a "$summary"
fi
if fpart sens; then # the C reference per plan on this classifier, on the host's cores
    for plan in ${FP8_SENS_PLANS:-plan inner:ff1 inner:ao+ff2}; do
        note "fp8: C reference, plan $plan ($(elapsed)s)"
        step 200 "$OUT/fp8-sens-${plan//[:\/+]/_}.log" $B/tests/fp8_sensitivity --model $D/model \
            --fixtures $D --threads "$(nproc)" "$plan"
        grep -E "%|error" "$OUT/fp8-sens-${plan//[:\/+]/_}.log" | tee -a "$summary"
    done
fi
if fpart recipes; then
    note "fp8 recipes on this classifier, torch simulation ($(elapsed)s)"
    PYTHONUNBUFFERED=1 step 420 "$OUT/fp8-recipes.log" python3 tests/bench/fp8_recipes.py --model $D/model \
        --device cuda --data "${FP8_DATA:-.devdata}" --cfpb 600 --recipes ${FP8_RECIPES:-10,15,16,17,18,19,20,21}
    grep -v -E 'Warning|warn' "$OUT/fp8-recipes.log" | tee -a "$summary"
fi
if fpart plans; then
    note "fp8: test_gpu_fp8 plans ($(elapsed)s)"
    step 200 "$OUT/fp8-plans.log" $B/tests/test_gpu_fp8 plans
    grep -E "^plan|FAIL" "$OUT/fp8-plans.log" | tee -a "$summary"
fi
