#!/usr/bin/env bash
# Session 13, call 5: dev/mlp_gemm_variants.py again (call 4's variant packages lacked families/glue), without the
# full family build (the script builds its own extensions).
set -o pipefail
export PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
O=${OUT:-out}; mkdir -p "$O"
timeout ${VT:-300} python dev/mlp_gemm_variants.py ${VARIANTS:+--variants $VARIANTS} > $O/variants.log 2>&1; echo "== variants rc=$? at $SECONDS s"
grep -v -i warn $O/variants.log | tail -14
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
