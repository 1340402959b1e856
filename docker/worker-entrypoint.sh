#!/bin/sh
# Entrypoint of the GPU worker image (docker/worker.Dockerfile): join the Ray cluster and block.
#
#   RAY_HEAD        host name or IP of the Ray head (required)
#   RAY_HEAD_PORT   its GCS port (default 6379)
#   RAY_NUM_GPUS    GPUs this node offers (default: Ray counts the GPUs the container sees)
#   RAY_NUM_CPUS    CPUs this node offers (default: Ray counts them)
#   RAY_NODE_IP     this node's address as the other nodes reach it (set it with --network host
#                   on a host with several interfaces)
#   RAY_START_ARGS  extra `ray start` flags; arguments given to the container are appended too
set -eu

: "${RAY_HEAD:?set RAY_HEAD to the host name or IP of the Ray head}"
set -- --address="${RAY_HEAD}:${RAY_HEAD_PORT:-6379}" --block --disable-usage-stats "$@"
[ -n "${RAY_NUM_GPUS:-}" ] && set -- --num-gpus="${RAY_NUM_GPUS}" "$@"
[ -n "${RAY_NUM_CPUS:-}" ] && set -- --num-cpus="${RAY_NUM_CPUS}" "$@"
[ -n "${RAY_NODE_IP:-}" ] && set -- --node-ip-address="${RAY_NODE_IP}" "$@"

# shellcheck disable=SC2086 # RAY_START_ARGS is a list of flags, split on purpose
exec ray start "$@" ${RAY_START_ARGS:-}
