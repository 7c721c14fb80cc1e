// Command downstream is the local stand-in for the services the outbox calls (an email API):
// it listens on 127.0.0.1:8025, honours Idempotency-Key as a real payment or email API does
// (a repeated key gets the first answer and no second effect), and prints every request.
//
//	go run ./localstack/downstream      (make run starts it)
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"
)

func main() {
	addr := os.Getenv("DOWNSTREAM_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8025"
	}
	var mu sync.Mutex
	seen := map[string]int{}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		mu.Lock()
		seen[key]++
		n := seen[key]
		mu.Unlock()
		effect := "sent"
		if n > 1 {
			effect = fmt.Sprintf("repeat #%d of this key: answered, not sent again", n)
		}
		fmt.Printf("%s  %s %s  Idempotency-Key: %s  %s  %s\n", time.Now().Format("15:04:05"), r.Method, r.URL.Path, key, body, effect)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ok":true,"key":%q}`, key)
	})
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt)
		<-stop
		srv.Close()
	}()
	fmt.Printf("downstream listening on http://%s (Ctrl-C to stop)\n", addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
