#!/usr/bin/env bash
# Session 39, first call: on an H200 every open target on main (gpu_call_s36b.sh: none lent since session 30; no
# prep); elsewhere gpu_call_s39a.sh (the late fence and the own-keys-first dQ^T beside main; prep in its header).
# carry [".gpu_data", ".vlf", ".vds", ".vboth"]
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then exec bash dev/gpu_call_s36b.sh; fi
exec bash dev/gpu_call_s39a.sh
