#!/bin/sh
# An mpiexec over two fake hosts (tb5_netns.sh, 2 slots each) for
# tests/e2e/test_layouts.py; the backend and paths come from the environment:
# TB5_NETNS_BACKEND, TB5_NETNS_PLUGINS, TB5_NETNS_OMPI, TB5_NETNS_SIM.
exec env TB5_NETNS_SLOTS=2 sh "$(dirname "$0")/tb5_netns.sh" "$TB5_NETNS_BACKEND" "$TB5_NETNS_PLUGINS" \
  "$TB5_NETNS_OMPI" "$TB5_NETNS_SIM" "$@"
