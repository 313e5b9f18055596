#!/usr/bin/env bash
# test_eaas_faults_dbo.sh — test_eaas_faults.sh with the client running
# double-batch overlap (--enable-dbo): every fault again, every text equal to
# the local server's.
EA_FAULTS_DBO=1 exec bash "$(dirname "$0")/test_eaas_faults.sh"
