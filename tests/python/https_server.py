"""An HTTPS server for tests that run servers in pods (Berth's tests/src/fixtures/python.rs).

    https_server.py HANDLERS PORT

serves HTTPS on PORT with /tls/tls.crt and /tls/tls.key, one thread per connection (a slow
answer holds up no other), HTTP/1.1 with keep-alive. Every request is answered by
HANDLERS.handle(method, path, headers, body) -> (status, content_type, body bytes), HANDLERS
being a module beside this file. A line per request goes to stdout (the pod's log).
"""

import http.server
import importlib
import signal
import ssl
import sys

handlers = importlib.import_module(sys.argv[1])
port = int(sys.argv[2])

context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("/tls/tls.crt", "/tls/tls.key")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, content_type, reply = handlers.handle(
            self.command, self.path, self.headers, body
        )
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = answer
    do_POST = answer
    do_PUT = answer
    do_PATCH = answer
    do_DELETE = answer

    def log_message(self, fmt, *args):
        print("%s %s" % (self.address_string(), fmt % args), flush=True)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def finish_request(self, request, client_address):
        # The TLS handshake happens here, in the connection's own thread, not in the accept
        # loop: a client that stalls its handshake holds up nobody else.
        try:
            request = context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            print("handshake with %s failed: %s" % (client_address[0], e), flush=True)
            return
        super().finish_request(request, client_address)


# PID 1 gets no default SIGTERM action: exit at once when the pod is deleted.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
server = Server(("", port), Handler)
print("serving HTTPS on port %d with %s" % (port, sys.argv[1]), flush=True)
server.serve_forever()
