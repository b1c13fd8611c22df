# Varnish (VCL 4.1): Vantage's health check, answered by varnishd itself.
#
# Save as /etc/varnish/vantage-health.vcl and include it in your main VCL right after the
# `vcl 4.1;` line and the backend definitions, BEFORE your own `sub vcl_recv`:
#
#     vcl 4.1;
#     backend default { .host = "127.0.0.1"; .port = "8080"; }
#     include "vantage-health.vcl";
#     sub vcl_recv { … your site logic … }
#
# Varnish runs the bodies of a subroutine defined several times in the order it reads them,
# so this one runs first and answers before any site logic, for any Host; the probe never
# reaches a backend (a dead origin does not make the edge look dead, and vice versa).

sub vcl_recv {
    if (req.url == "/.vantage/health" && (req.method == "GET" || req.method == "HEAD")) {
        return (synth(200, "OK"));
    }
}

sub vcl_synth {
    if (resp.status == 200 && req.url == "/.vantage/health") {
        set resp.http.Content-Type = "text/plain";
        set resp.http.Cache-Control = "no-store";
        set resp.body = "ok";
        return (deliver);
    }
}
