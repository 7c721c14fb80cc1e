// Command outbox is the storefront's outbox Lambda, with its CRM executor.
package main

import (
	"example.com/storefront/executors"
	"github.com/oncehook/oncehook/launch"
)

func main() { launch.Outbox(executors.All()) }
