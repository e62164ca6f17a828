module example.com/yourservice

go 1.26

require github.com/slotsync/slotsync v0.1.0
