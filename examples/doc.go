// Package examples holds deployment recipes for slotsync; its tests check each recipe as far
// as the machine running them allows.
package examples
