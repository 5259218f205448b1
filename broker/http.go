package broker

// The operations HTTP server (Config.HTTPAddr): what an operator or an
// orchestrator looks at, never a client of the Kafka protocol.
//
//	/metrics        Prometheus text format, from the broker's own registry (package metrics)
//	/healthz        200 while the process serves HTTP (liveness)
//	/readyz         200 once recovery has finished and the Kafka listener
//	                serves, 503 before that and once shutdown begins
//	/debug/pprof/   net/http/pprof, only with Config.Pprof
//
// It starts first in Broker.Start, before the metadata store and the
// partition logs recover, so a long recovery is visible (/readyz 503,
// shoal_ready 0) instead of looking like a dead process; it stops last in
// Close.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

type httpServer struct {
	srv  *http.Server
	ln   net.Listener
	once sync.Once
}

// startHTTP binds Config.HTTPAddr and serves it; no-op when it is empty.
func (b *Broker) startHTTP() error {
	if b.cfg.HTTPAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", b.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("broker: http listen %s: %w", b.cfg.HTTPAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(b.metrics.Registry(), promhttp.HandlerOpts{
		ErrorLog:      promErrorLog{b.lg.Named("metrics")},
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		switch {
		case b.ready.Load():
			fmt.Fprintln(w, "ready")
		case b.ctx.Err() != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "shutting down")
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "recovering")
		}
	})
	if b.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	h := &httpServer{ln: ln, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          zap.NewStdLog(b.lg.Named("http")),
	}}
	b.http = h
	b.goroutine(func() {
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.lg.Error("http server failed", zap.Error(err))
		}
	})
	b.lg.Info("serving http", zap.String("addr", ln.Addr().String()), zap.Bool("pprof", b.cfg.Pprof))
	return nil
}

// stopHTTP closes the HTTP server; safe to call more than once.
func (b *Broker) stopHTTP() {
	if h := b.http; h != nil {
		h.once.Do(func() {
			// Shutdown waits for scrapes in progress: they read state Close
			// is about to tear down.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if h.srv.Shutdown(ctx) != nil {
				h.srv.Close()
			}
		})
	}
}

// HTTPAddr is the address the operations HTTP server is bound to, or ""
// when it is disabled.
func (b *Broker) HTTPAddr() string {
	if b.http == nil {
		return ""
	}
	return b.http.ln.Addr().String()
}

// promErrorLog routes promhttp's errors (a collector failing) to zap.
type promErrorLog struct{ lg *zap.Logger }

func (l promErrorLog) Println(v ...any) { l.lg.Error(fmt.Sprint(v...)) }
