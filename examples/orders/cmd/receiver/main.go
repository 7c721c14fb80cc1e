// Command receiver is the reference application's receiver: oncehook's receiver with the
// orders planner for the local stack's sources ("shop", and "shop-batch", which posts batches).
// The local stack (make run, make test) deploys it; an application's own receiver is the same
// few lines with its planners.
package main

import (
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/launch"
	"github.com/oncehook/oncehook/receiver"
)

func main() {
	launch.Receiver(func(p *receiver.Planners) {
		orders.Register(p, "shop")
		orders.Register(p, "shop-batch")
	})
}
