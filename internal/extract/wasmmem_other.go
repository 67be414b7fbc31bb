//go:build unix && !linux

package extract

const mapNoReserve = 0
