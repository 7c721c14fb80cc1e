// Command receiver is the storefront's receiver Lambda.
package main

import (
	"example.com/storefront/planners"
	"github.com/oncehook/oncehook/launch"
)

func main() { launch.Receiver(planners.Register) }
