#!/usr/bin/env bash
# Session 37, first call: every open target on main if the card is an H200 (gpu_call_s36b.sh), else the two backward
# patches beside main (gpu_call_s37b.sh; its prep and carry).
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash dev/gpu_call_s36b.sh; else bash dev/gpu_call_s37b.sh; fi
