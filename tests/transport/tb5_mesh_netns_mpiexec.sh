#!/bin/sh
# An mpiexec over four fake hosts cabled as a full mesh (tb5_mesh_netns.sh)
# for tests/e2e/test_layouts.py; the backend and paths come from the
# environment: TB5_NETNS_BACKEND, TB5_NETNS_PLUGINS, TB5_NETNS_OMPI, TB5_NETNS_SIM.
exec env TB5_MESH_MPIEXEC=1 sh "$(dirname "$0")/tb5_mesh_netns.sh" "$TB5_NETNS_BACKEND" "$TB5_NETNS_PLUGINS" \
  "$TB5_NETNS_OMPI" "$TB5_NETNS_SIM" "$@"
