package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
)

// maxBody bounds how much of a request body is echoed back.
const maxBody = 64 << 10

// echoHandler writes the request back in the layout of the tutorial's echoserver. The first two
// lines after the heading are what the scenarios grep: client_address is the address the TCP
// connection came from, i.e. what survived (or did not survive) SNAT on the way.
func echoHandler(name string) http.Handler {
	stream := streamHandler(name)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			stream.ServeHTTP(w, r)
			return
		}
		client, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			client = r.RemoteAddr
		}
		server := "unknown"
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			server = a.String()
		}
		query := r.URL.RawQuery
		if query == "" {
			query = "nil"
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))

		var b strings.Builder
		fmt.Fprintf(&b, "CLIENT VALUES:\n")
		fmt.Fprintf(&b, "client_address=%s\n", client)
		fmt.Fprintf(&b, "command=%s\n", r.Method)
		fmt.Fprintf(&b, "real path=%s\n", r.URL.Path)
		fmt.Fprintf(&b, "query=%s\n", query)
		fmt.Fprintf(&b, "request_version=%d.%d\n", r.ProtoMajor, r.ProtoMinor)
		fmt.Fprintf(&b, "request_uri=http://%s%s\n", r.Host, r.URL.RequestURI())
		fmt.Fprintf(&b, "\nSERVER VALUES:\n")
		fmt.Fprintf(&b, "hostname=%s\n", name)
		fmt.Fprintf(&b, "server_address=%s\n", server)
		fmt.Fprintf(&b, "\nHEADERS RECEIVED:\n")
		keys := make([]string, 0, len(r.Header)+1)
		headers := map[string]string{"host": r.Host}
		keys = append(keys, "host")
		for k, v := range r.Header {
			lk := strings.ToLower(k)
			keys = append(keys, lk)
			headers[lk] = strings.Join(v, ", ")
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s\n", k, headers[k])
		}
		fmt.Fprintf(&b, "BODY:\n")
		if len(body) == 0 {
			fmt.Fprintf(&b, "-no body in request-\n")
		} else {
			fmt.Fprintf(&b, "%s\n", body)
		}

		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, b.String())
	})
}
