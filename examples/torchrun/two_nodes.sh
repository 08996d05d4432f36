#!/bin/bash
# GRPO with FSDP2 over two nodes, one process per node (use --nproc-per-node N for N GPUs per node), torchrun's c10d
# rendezvous. Run it on each node with NODE_RANK=0 or 1 and MASTER=the first node's address; output_dir must be a
# folder both nodes can reach (checkpoints are written by every rank into it).
#   NODE_RANK=0 MASTER=10.0.0.1 examples/torchrun/two_nodes.sh --set output_dir=/shared/runs/grpo
#   NODE_RANK=1 MASTER=10.0.0.1 examples/torchrun/two_nodes.sh --set output_dir=/shared/runs/grpo
# Check it on one machine (two "nodes" on loopback, what tests/test_distributed.py does):
#   NODE_RANK=0 MASTER=127.0.0.1 examples/torchrun/two_nodes.sh --set output_dir=/tmp/two --set grpo.steps=2 &
#   NODE_RANK=1 MASTER=127.0.0.1 examples/torchrun/two_nodes.sh --set output_dir=/tmp/two --set grpo.steps=2; wait
# Resume it with the same command and --resume (any number of nodes: the checkpoint reshards as it loads).
set -euo pipefail
cd "$(dirname "$0")/../.."
export ACCELERATE_USE_FSDP=true FSDP_VERSION=2          # the sharding request (what an accelerate FSDP config exports)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec .venv/bin/torchrun --nnodes 2 --node-rank "${NODE_RANK:?set NODE_RANK to 0 or 1}" --nproc-per-node "${NPROC:-1}" \
    --rdzv-backend c10d --rdzv-endpoint "${MASTER:?set MASTER to the first node's address}:${PORT:-29500}" \
    --rdzv-id "${RUN_ID:-reasoning-rl}" -m reasoning_rl train grpo "$@"
