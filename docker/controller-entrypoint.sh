#!/bin/sh
# Entrypoint of the controller image (docker/controller.Dockerfile).
#
# A Ray driver must run on a Ray node: ray.init(address=...) looks for a raylet on its own host.
# So when RAY_ADDRESS names a cluster (host:port), this container first joins it as a node that
# offers no CPUs and no GPUs (no trial is ever placed here), then runs the command, by default
# `groupscale up`. Without RAY_ADDRESS (the MLflow and Ray-head services) it only runs the command.
#
# Environment: RAY_ADDRESS (head host:port), RAY_NODE_IP (this node's address as the other nodes
# reach it; needed with host networking), RAY_START_ARGS (extra `ray start` flags).
set -eu

case "${RAY_ADDRESS:-}" in
  "" | auto | local | ray://*) ;;
  *)
    node_ip=""
    [ -n "${RAY_NODE_IP:-}" ] && node_ip="--node-ip-address=${RAY_NODE_IP}"
    # shellcheck disable=SC2086 # RAY_START_ARGS is a list of flags, split on purpose
    ray start --address="${RAY_ADDRESS}" --num-cpus=0 --num-gpus=0 --disable-usage-stats \
      ${node_ip} ${RAY_START_ARGS:-}
    ;;
esac

exec "$@"
