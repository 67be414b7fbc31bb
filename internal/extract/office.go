package extract

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"unicode/utf16"
)

// Office files that are not documents datachat reads, told apart so that
// the refusal says what the file is and what to do with it: an Excel
// workbook (a dataset, not a document), a PowerPoint presentation, and the
// OLE2 compound files — old binary .doc, .xls and .ppt, and any Office file
// saved with a password, which Office wraps in OLE2 whatever its extension.

// oleMagic starts every OLE2 compound file.
var oleMagic = []byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1")

// officeZip says which Office package a zip archive holds: "xl" (Excel),
// "ppt" (PowerPoint), or "" for neither. Only the archive's directory is
// read.
func officeZip(ra io.ReaderAt, size int64) string {
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return ""
	}
	main := mainPartName(zr)
	for i, f := range zr.File {
		if i == maxZipEntries {
			break
		}
		for _, kind := range []string{"xl", "ppt"} {
			if strings.HasPrefix(main, kind+"/") || f.Name == kind+"/workbook.xml" || f.Name == kind+"/presentation.xml" {
				return kind
			}
		}
	}
	return ""
}

// oleStreams are the streams that tell OLE2 files apart, most telling first:
// a password-protected Office file holds EncryptedPackage (and
// EncryptionInfo), a Word 97–2003 document WordDocument, a workbook
// Workbook (Book before Excel 97), a presentation "PowerPoint Document".
var oleStreams = []string{"EncryptedPackage", "WordDocument", "Workbook", "Book", "PowerPoint Document"}

// oleKind describes an OLE2 compound file for the refusal (see detect),
// from the names of its streams.
func oleKind(ra io.ReaderAt, size int64, ext string) string {
	switch oleStream(ra, size) {
	case "EncryptedPackage":
		if ext == ".xlsx" || ext == ".xlsm" || ext == ".xls" {
			return " (a password-protected Excel workbook: an Excel workbook is added as a dataset, not a document; remove its password in Excel first (File › Info › Protect Workbook › Encrypt with Password, then clear it))"
		}
		return " (a password-protected Office document: remove the password (in Word: File › Info › Protect Document › Encrypt with Password, then clear it), save it, and upload it again)"
	case "WordDocument":
		return " (a Word 97–2003 document (.doc): save it as .docx or PDF and upload that)"
	case "Workbook", "Book":
		return " (an Excel 97–2003 workbook (.xls): save it as .xlsx or CSV and add it as a dataset)"
	case "PowerPoint Document":
		return " (a PowerPoint 97–2003 presentation: save it as PDF and upload that)"
	}
	return " (an old Microsoft Office file (.doc, .xls, .ppt): save it as .docx or PDF)"
}

// oleDirEntry is the size of an entry of an OLE2 file's directory; entries
// start at multiples of it (the header and every sector are multiples of
// 512 bytes).
const oleDirEntry = 128

// oleStream returns the most telling of oleStreams that the file's
// directory names, or "". It reads the file once, in entry-sized records,
// looking for a directory entry: a stream's name in UTF-16, its terminator,
// and at byte 64 the name's length in bytes (terminator included). Text in
// a stream that happens to spell a name does not sit so.
func oleStream(ra io.ReaderAt, size int64) string {
	names := make([][]byte, len(oleStreams))
	for i, n := range oleStreams {
		for _, u := range utf16.Encode([]rune(n)) {
			names[i] = binary.LittleEndian.AppendUint16(names[i], u)
		}
		names[i] = append(names[i], 0, 0)
	}
	best := len(oleStreams)
	buf := make([]byte, 256*oleDirEntry)
	for off := int64(512); off < size && best > 0; off += int64(len(buf)) {
		n, err := ra.ReadAt(buf, off)
		for rec := 0; rec+oleDirEntry <= n; rec += oleDirEntry {
			e := buf[rec : rec+oleDirEntry]
			nameLen := int(binary.LittleEndian.Uint16(e[64:66]))
			for i := 0; i < best; i++ {
				if nameLen == len(names[i]) && bytes.Equal(e[:nameLen], names[i]) {
					best = i
				}
			}
		}
		if err != nil && !errors.Is(err, io.EOF) || n < len(buf) {
			break
		}
	}
	if best == len(oleStreams) {
		return ""
	}
	return oleStreams[best]
}
