package main

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"sync"
)

// testPNG is a small valid PNG (8x8, red and white checks), built once.
var testPNG = sync.OnceValue(func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for y := range 8 {
		for x := range 8 {
			c := color.RGBA{R: 255, G: 255, B: 255, A: 255}
			if (x+y)%2 == 0 {
				c = color.RGBA{R: 220, A: 255}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
})

// testWAV is a valid WAV file: 10 ms of silence, 8 kHz, mono, 16-bit PCM.
var testWAV = sync.OnceValue(func() []byte {
	const (
		rate     = 8000
		channels = 1
		bits     = 16
		samples  = rate / 100
		dataLen  = samples * channels * bits / 8
	)
	var buf bytes.Buffer
	le := func(v any) { binary.Write(&buf, binary.LittleEndian, v) } //nolint:errcheck // bytes.Buffer
	buf.WriteString("RIFF")
	le(uint32(36 + dataLen))
	buf.WriteString("WAVEfmt ")
	le(uint32(16))                         // fmt chunk size
	le(uint16(1))                          // PCM
	le(uint16(channels))                   // channels
	le(uint32(rate))                       // sample rate
	le(uint32(rate * channels * bits / 8)) // byte rate
	le(uint16(channels * bits / 8))        // block align
	le(uint16(bits))                       // bits per sample
	buf.WriteString("data")
	le(uint32(dataLen))
	buf.Write(make([]byte, dataLen))
	return buf.Bytes()
})
