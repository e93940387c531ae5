package git

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/net/proxy"
)

// go-git reads SSH and git:// streams itself, and holds a ref advertisement in memory
// whole, so a server that never stops advertising refs would grow the manager without
// bound. The bytes are counted on the connection instead: SSH connections are dialled
// through a proxy dialer of our own (go-git's one hook on that path), and git:// ones go
// through a loopback relay. Either counts what the server sends against the meter of the
// operation in progress on the session (the listing's, then the fetch's).

// wireScheme is the proxy URL scheme of the counting dialer; the URL's host names the
// session's wire.
const wireScheme = "stackwright-wire"

// wire is the meter of the operation in progress on one session's connection.
type wire struct {
	m atomic.Pointer[meter]
}

// use counts what follows against m, and tells m that its bytes are counted on the wire
// (so that the pack stream above is not counted twice).
func (w *wire) use(m *meter) {
	m.wired.Store(true)
	w.m.Store(m)
}

// reader counts r's bytes against the current meter.
func (w *wire) reader(r io.Reader) io.Reader { return wireReader{r: r, w: w} }

type wireReader struct {
	r io.Reader
	w *wire
}

func (r wireReader) Read(p []byte) (int, error) {
	if m := r.w.m.Load(); m != nil {
		return (&meteredReader{r: r.r, m: m}).Read(p)
	}
	return r.r.Read(p)
}

// wires are the SSH sessions' wires, by the id in their proxy URL.
var wires = struct {
	sync.Mutex
	next uint64
	byID map[string]*wire
}{byID: map[string]*wire{}}

func registerWire(w *wire) (string, func()) {
	wires.Lock()
	defer wires.Unlock()
	wires.next++
	id := "w" + strconv.FormatUint(wires.next, 10)
	wires.byID[id] = w
	return id, func() {
		wires.Lock()
		defer wires.Unlock()
		delete(wires.byID, id)
	}
}

func init() {
	proxy.RegisterDialerType(wireScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		wires.Lock()
		w, ok := wires.byID[u.Host]
		wires.Unlock()
		if !ok {
			return nil, fmt.Errorf("no git session %q", u.Host)
		}
		return wireDialer{w: w}, nil
	})
}

// wireDialer dials as go-git would without a proxy (honouring the manager's own proxy
// settings) and counts what the connection reads.
type wireDialer struct{ w *wire }

func (d wireDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d wireDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := proxy.Dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return wireConn{Conn: conn, r: d.w.reader(conn)}, nil
}

type wireConn struct {
	net.Conn
	r io.Reader
}

func (c wireConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// wiredSession is an upload-pack session whose connection is counted on its wire.
type wiredSession struct {
	transport.UploadPackSession
	wire    *wire
	release func()
}

func (s *wiredSession) Close() error {
	err := s.UploadPackSession.Close()
	s.release()
	return err
}

// meterWire counts sess's connection against m from now on, when it is a wired session.
func meterWire(sess transport.UploadPackSession, m *meter) {
	if cs, ok := sess.(chargedSession); ok {
		sess = cs.UploadPackSession
	}
	if ws, ok := sess.(*wiredSession); ok {
		ws.wire.use(m)
	}
}

// wiredEndpoint returns the endpoint go-git is to connect to for ep so that the session's
// bytes are counted on w, and what to call once the session is closed. HTTP(S) is counted
// by the cache's HTTP transport already; file:// reads no network.
func wiredEndpoint(ctx context.Context, ep *transport.Endpoint, w *wire) (*transport.Endpoint, func(), error) {
	switch ep.Protocol {
	case "ssh":
		id, release := registerWire(w)
		out := *ep
		out.Proxy = transport.ProxyOptions{URL: wireScheme + "://" + id}
		return &out, release, nil
	case "git":
		relay, err := startGitRelay(ctx, ep, w)
		if err != nil {
			return nil, nil, err
		}
		out := *ep
		out.Host, out.Port = "127.0.0.1", relay.port
		return &out, relay.close, nil
	}
	return ep, func() {}, nil
}

// gitRelay takes go-git's one git:// connection on a loopback port and relays it to the
// server, which it has already dialled (so that a refused connection is reported as
// such), restoring the request's host, and counting what the server sends.
type gitRelay struct {
	ln   net.Listener
	port int
}

// relayAcceptTimeout bounds how long a relay waits for go-git's connection.
const relayAcceptTimeout = 30 * time.Second

func startGitRelay(ctx context.Context, ep *transport.Endpoint, w *wire) (*gitRelay, error) {
	port := ep.Port
	if port <= 0 {
		port = 9418
	}
	server, err := proxy.Dial(ctx, "tcp", net.JoinHostPort(ep.Host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = server.Close()
		return nil, err
	}
	r := &gitRelay{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	host := ep.Host
	if ep.Port > 0 && ep.Port != 9418 {
		host = net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
	}
	go r.serve(server, host, w)
	return r, nil
}

func (r *gitRelay) serve(server net.Conn, host string, w *wire) {
	defer func() { _ = server.Close() }()
	if tl, ok := r.ln.(*net.TCPListener); ok {
		_ = tl.SetDeadline(time.Now().Add(relayAcceptTimeout))
	}
	client, err := r.ln.Accept()
	_ = r.ln.Close()
	if err != nil {
		return
	}
	defer func() { _ = client.Close() }()
	var req packp.GitProtoRequest
	if err := req.Decode(client); err != nil {
		return
	}
	req.Host = host
	if err := req.Encode(server); err != nil {
		return
	}
	go func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
	}()
	// Over the cap the reader fails: both connections close, and go-git's read with them.
	_, _ = io.Copy(client, w.reader(server))
}

// close stops a relay whose connection never came; a relayed session ends with go-git's
// connection.
func (r *gitRelay) close() { _ = r.ln.Close() }
