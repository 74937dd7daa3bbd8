#!/usr/bin/python3
"""ibv_devinfo's report, through the verbs simulator (libtb5_verbs_sim.so) in
place of a real verbs library: which devices this host has and each port's
state, in ibv_devinfo's own format (hca_id, port, state), so that
jobs/tb5/check-cluster reads the two alike. The simulator's devices come
from TB5_SIM_WIRING and TB5_SIM_HOST (src/transport/tb5/sim).
  sim_devinfo.py LIBRARY"""
import ctypes
import socket
import struct
import sys

PORT_STATES = {1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE", 5: "PORT_ACTIVE_DEFER"}


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
    lib.ibv_get_device_name.restype = ctypes.c_char_p
    lib.ibv_get_device_name.argtypes = [ctypes.c_void_p]
    lib.ibv_open_device.restype = ctypes.c_void_p
    lib.ibv_open_device.argtypes = [ctypes.c_void_p]
    lib.ibv_query_port.argtypes = [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_void_p]
    lib.tb5_verbs_device_ipv4.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32),
                                          ctypes.POINTER(ctypes.c_uint8)]
    n = ctypes.c_int(0)
    devices = lib.ibv_get_device_list(ctypes.byref(n))
    if not devices or n.value == 0:
        print("No IB devices found")
        return 0
    for i in range(n.value):
        name = lib.ibv_get_device_name(devices[i]).decode()
        ctx = lib.ibv_open_device(devices[i])
        attr = ctypes.create_string_buffer(256)  # struct ibv_port_attr: its first field is the state
        state = lib.ibv_query_port(ctx, 1, attr) == 0 and struct.unpack_from("i", attr.raw)[0]
        addr, prefix = ctypes.c_uint32(0), ctypes.c_uint8(0)
        lib.tb5_verbs_device_ipv4(ctx, ctypes.byref(addr), ctypes.byref(prefix))
        print(f"hca_id:\t{name}\n\ttransport:\t\t\tsimulated (tb5 verbs simulator)\n\t\tport:\t1\n"
              f"\t\t\tstate:\t\t\t{PORT_STATES.get(state, 'PORT_DOWN')} ({state or 0})\n"
              f"\t\t\tsim_ipv4:\t\t{socket.inet_ntoa(struct.pack('I', addr.value))}/{prefix.value}\n")
    return 0


sys.exit(main())
