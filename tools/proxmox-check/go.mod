module gates/tools/proxmox-check

go 1.25.0

require (
	github.com/buger/goterm v1.0.4 // indirect
	github.com/diskfs/go-diskfs v1.9.3 // indirect
	github.com/djherbis/times v1.6.0 // indirect
	github.com/gorilla/websocket v1.4.2 // indirect
	github.com/jinzhu/copier v0.3.4 // indirect
	github.com/luthermonson/go-proxmox v0.8.2 // indirect
	github.com/magefile/mage v1.14.0 // indirect
	golang.org/x/sys v0.43.0 // indirect
)
