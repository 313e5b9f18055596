#!/usr/bin/env bash
# test_ucx_transport_tcp.sh — test_ucx_transport again with UCX over TCP only
# (UCX_TLS=tcp), the transport between hosts.
set -u
exec env EA_UCX_TCP=1 "${EA_BUILD:?}/tests/test_ucx_transport"
