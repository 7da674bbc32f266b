#!/usr/bin/python3
"""actor_raw: one call to an actor over its wire, framed by hand (docs/actors.md "The wire"):
what a hostile caller that holds the secret can send that libhv's callers cannot, such as a
method name over 255 bytes or with a NUL inside. It shares no code with libhv.

usage: actor_raw.py HOST:PORT METHOD [ARG]
The secret comes from HV_ACTOR_SECRET; METHOD may hold \\xNN escapes ("get\\x00evil") and
"@N" repeats the letter m N times. Prints one line: "reply <code> <text>" (the call ran: its
status and result), "error <code> <text>" (an ERROR frame: refused), or "closed"; exits 0.
"""
import hashlib
import hmac
import os
import socket
import struct
import sys

HELLO, AUTH, WELCOME, ERROR, CALL, REPLY = 1, 2, 3, 4, 5, 6


def hdr(length, ftype, name_len=0, ident=0):
    return struct.pack("<IBBHQ", length, ftype, 0, name_len, ident)


def read_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def read_frame(s):
    length, ftype, _, _, ident = struct.unpack("<IBBHQ", read_exact(s, 16))
    return ftype, read_exact(s, length)


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    method = sys.argv[2]
    if method.startswith("@"):
        method = b"m" * int(method[1:])
    else:
        method = method.encode().decode("unicode_escape").encode("latin-1")
    arg = sys.argv[3].encode() if len(sys.argv) > 3 else b""
    secret = os.environ["HV_ACTOR_SECRET"].encode()
    s = socket.create_connection((host, int(port)), timeout=5)
    ftype, body = read_frame(s)
    if ftype != HELLO:
        print("not an actor")
        return
    anonce = body[12:44]
    cnonce = os.urandom(32)
    mac = hmac.new(secret, b"hv-actor-v1 caller" + anonce + cnonce, hashlib.sha256).digest()
    s.sendall(hdr(64, AUTH) + cnonce + mac)
    try:
        ftype, body = read_frame(s)
        if ftype == ERROR:
            print("error %d %s" % (struct.unpack("<I", body[:4])[0], body[4:].decode(errors="replace")))
            return
        s.sendall(hdr(len(method) + len(arg), CALL, len(method), 1) + method + arg)
        ftype, body = read_frame(s)
    except EOFError:
        print("closed")
        return
    code = struct.unpack("<I", body[:4])[0]
    print("%s %d %s" % ("reply" if ftype == REPLY else "error" if ftype == ERROR else "frame%d" % ftype,
                        code, body[4:].decode(errors="replace")))


main()
