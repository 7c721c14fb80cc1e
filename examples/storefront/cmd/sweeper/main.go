// Command sweeper is the storefront's sweeper Lambda, with the same executors as its outbox.
package main

import (
	"example.com/storefront/executors"
	"github.com/oncehook/oncehook/launch"
)

func main() { launch.Sweeper(executors.All()) }
