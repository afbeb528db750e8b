#!/usr/bin/env bash
# Session 38, first call: on an H200 every open target on main (gpu_call_s36b.sh: none lent since session 30);
# elsewhere main's attention checks and the D = 128 backward's Nsight Compute stall samples beside cuDNN's
# (gpu_call_s37c.sh). No prep; carry [".gpu_data"].
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then exec bash dev/gpu_call_s36b.sh; fi
exec bash dev/gpu_call_s37c.sh .
