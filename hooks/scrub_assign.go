package hooks

import "strings"

// maxValue is the longest value a credential key may have.
const maxValue = 1024

// keyKind is what a credential key holds.
type keyKind uint8

const (
	kindNone     keyKind = iota
	kindPassword         // any value of 4+ characters, digits included
	kindToken            // a value that is not a plain number
	kindAuth             // an Authorization header: "<scheme> <credentials>"
)

// keyword is the end of a key name that holds a credential. Words are
// compared without case and without '_' and '-', so "apikey" matches
// api_key, API-KEY and apiKey.
type keyword struct {
	word string
	kind keyKind
	// boundary requires the word to start the key or follow '_', '-', '.'
	// or a lower-to-upper case change ("auth" but not "oauth").
	boundary bool
}

var keywords = []keyword{
	{word: "password", kind: kindPassword},
	{word: "passwd", kind: kindPassword},
	{word: "passphrase", kind: kindPassword},
	{word: "secret", kind: kindToken},
	{word: "token", kind: kindToken},
	{word: "apikey", kind: kindToken},
	{word: "accesskey", kind: kindToken},
	{word: "secretkey", kind: kindToken},
	{word: "privatekey", kind: kindToken},
	{word: "signingkey", kind: kindToken},
	{word: "encryptionkey", kind: kindToken},
	{word: "masterkey", kind: kindToken},
	{word: "accountkey", kind: kindToken},
	{word: "authkey", kind: kindToken},
	{word: "clientkey", kind: kindToken},
	{word: "appkey", kind: kindToken},
	{word: "consumerkey", kind: kindToken},
	{word: "subscriptionkey", kind: kindToken},
	{word: "credentials", kind: kindToken},
	{word: "credential", kind: kindToken},
	{word: "auth", kind: kindToken, boundary: true},
	{word: "pass", kind: kindPassword, boundary: true},
	{word: "pwd", kind: kindPassword, boundary: true},
	{word: "pw", kind: kindPassword, boundary: true},
	{word: "authorization", kind: kindAuth},
}

// keywordsByLast indexes keywords by their last letter.
var keywordsByLast = func() (idx [256][]*keyword) {
	for i := range keywords {
		k := &keywords[i]
		idx[k.word[len(k.word)-1]] = append(idx[k.word[len(k.word)-1]], k)
	}
	return idx
}()

func lower(c byte) byte {
	if isUpper(c) {
		return c + 'a' - 'A'
	}
	return c
}

func isIdentChar(c byte) bool { return classes[c]&cIdent != 0 }

// keyKindOf says whether key ends with a credential keyword.
func keyKindOf(key string) keyKind {
	if key == "" {
		return kindNone
	}
	for _, k := range keywordsByLast[lower(key[len(key)-1])] {
		if endsWithWord(key, k) {
			return k.kind
		}
	}
	return kindNone
}

func endsWithWord(key string, k *keyword) bool {
	i := len(key) - 1
	for w := len(k.word) - 1; w >= 0; w-- {
		for i >= 0 && (key[i] == '_' || key[i] == '-') && w < len(k.word)-1 {
			i--
		}
		if i < 0 || lower(key[i]) != k.word[w] {
			return false
		}
		i--
	}
	if !k.boundary || i < 0 {
		return true
	}
	p := key[i]
	return p == '_' || p == '-' || p == '.' || (isLower(p) && isUpper(key[i+1]))
}

// assignments finds the values of credential keys: key: value, key=value,
// "key": "value", key := value, key => value, <key>value</key>,
// --key value.
func (f *finder) assignments() {
	t := f.text
	for i := 0; i < len(t); {
		if !isIdentChar(t[i]) {
			i++
			continue
		}
		s := i
		for i < len(t) && isIdentChar(t[i]) {
			i++
		}
		f.assignmentAt(s, i)
	}
}

func (f *finder) assignmentAt(s, e int) {
	t := f.text
	if s < f.valueEnd {
		return // inside the value of the key before: scanned already
	}
	j := e
	var open byte
	if s > 0 {
		open = t[s-1]
	}
	if j < len(t) && (t[j] == '"' || t[j] == '\'' || t[j] == '`') && t[j] == open {
		j++
	}
	for j < len(t) && (t[j] == ' ' || t[j] == '\t') {
		j++
	}
	if j >= len(t) {
		return
	}
	var xml, flag bool
	switch t[j] {
	case ':':
		switch {
		case strings.HasPrefix(t[j:], ":="):
			j += 2
		case strings.HasPrefix(t[j:], "::"), strings.HasPrefix(t[j:], "://"):
			return
		default:
			j++
		}
	case '=':
		switch {
		case strings.HasPrefix(t[j:], "=>"):
			j += 2
		case strings.HasPrefix(t[j:], "=="), strings.HasPrefix(t[j:], "=~"):
			return
		default:
			j++
		}
	case '>':
		if open != '<' || j != e {
			return
		}
		xml = true
		j++
	default:
		if t[s] != '-' || j == e || t[j] == '-' {
			return
		}
		flag = true
	}
	kind := keyKindOf(strings.TrimRight(t[s:e], ".-"))
	if kind == kindNone {
		return
	}
	if !flag && !xml {
		for j < len(t) && (t[j] == ' ' || t[j] == '\t') {
			j++
		}
	}
	if j >= len(t) {
		return
	}
	// Values longer than maxValue are not credentials; never scan further
	// (keeps the scan linear on hostile input).
	limit := min(len(t), j+maxValue+2)
	vs, ve, quoted := j, j, false
	switch {
	case xml:
		for ve < limit && t[ve] != '<' && t[ve] != '\n' {
			ve++
		}
		if ve >= len(t) || t[ve] != '<' {
			return // no closing tag: "<name>" was a placeholder, not an element
		}
	case t[j] == '"' || t[j] == '\'' || t[j] == '`':
		q := t[j]
		vs = j + 1
		ve = vs
		for ve < limit && t[ve] != q && t[ve] != '\n' {
			if t[ve] == '\\' && ve+1 < limit && t[ve+1] != '\n' {
				ve++
			}
			ve++
		}
		ve = min(ve, limit)
		quoted = true
	case kind == kindAuth:
		for ve < limit && t[ve] != '\n' && t[ve] != '\r' && t[ve] != '"' && t[ve] != '\'' && t[ve] != '`' {
			ve++
		}
	default:
		for ve < limit && !endsValue(t[ve]) && !endsQueryValue(t, ve) {
			ve++
		}
		if ve < len(t) && (t[ve] == '(' || t[ve] == '[') {
			return // a call or an index: code, not a value
		}
	}
	f.valueEnd = ve
	v := t[vs:ve]
	if kind == kindAuth {
		// "<scheme> <credentials>": keep the scheme.
		v = strings.TrimRight(v, " \t")
		if sp := strings.IndexAny(v, " \t"); sp > 0 && isWord(v[:sp]) {
			rest := strings.TrimLeft(v[sp:], " \t")
			vs += len(v) - len(rest)
			v = rest
		}
		ve = vs + len(v)
		if len(v) < 8 || len(v) > maxValue || placeholder(v) {
			return
		}
		f.add(vs, ve, "authorization")
		return
	}
	if !plausibleValue(v, quoted || xml, kind) {
		return
	}
	f.add(vs, ve, "assignment")
}

// endsValue ends an unquoted value.
func endsValue(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '"', '\'', '`', ',', ';', '<', '>', '(', ')', '[', ']', '{', '}':
		return true
	}
	return false
}

// endsQueryValue reports an '&' at t[i] that starts the next parameter of
// a query string (&name=) or a shell's next command (& or && after a
// space): otherwise it is part of the value (a password with '&').
func endsQueryValue(t string, i int) bool {
	if t[i] != '&' {
		return false
	}
	j := i + 1
	if j >= len(t) || t[j] == '&' || t[j] == ' ' || t[j] == '\n' {
		return true
	}
	for j < len(t) && (isIdentChar(t[j]) || t[j] == '[' || t[j] == ']') {
		j++
	}
	return j < len(t) && j > i+1 && t[j] == '='
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLetter(s[i]) && !isDigit(s[i]) && s[i] != '-' {
			return false
		}
	}
	return s != ""
}

// plausibleValue says whether v, the value of a credential key, looks like
// a credential rather than a placeholder, a type, a variable or prose.
func plausibleValue(v string, quoted bool, kind keyKind) bool {
	if len(v) < 4 || len(v) > maxValue || placeholder(v) || publicByFormat(v) {
		return false
	}
	if quoted {
		return strings.Count(v, " ") < 2 // three words or more: a message
	}
	if isCodeRef(v) || isPath(v) {
		return false
	}
	if kind != kindPassword && allDigits(v) {
		return false
	}
	if isIdentifier(v) && keyKindOf(v) != kindNone {
		return false // password = user_password: a variable
	}
	return true
}

// placeholder reports values that stand for a credential without being
// one: variables, templates, masks, types, booleans, empty markers.
func placeholder(v string) bool {
	if varRef(v) || placeholderShape(v) {
		return true
	}
	switch v[0] {
	case '<', '[', '{', '@':
		return true
	}
	masked := true
	for i := 0; i < len(v); i++ {
		if strings.IndexByte("*xX.#-_•", v[i]) < 0 {
			masked = false
			break
		}
	}
	if masked {
		return true
	}
	switch strings.ToLower(v) {
	case "null", "nil", "none", "true", "false", "yes", "no", "on", "off", "undefined",
		"empty", "required", "optional", "string", "str", "bytes", "int", "bool",
		"boolean", "number", "object", "secret", "password", "token", "redacted",
		"hidden", "masked", "example", "omitted", "unset", "not set", "n/a":
		return true
	}
	return false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func isIdentifier(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' && s[i] != '-' {
			return false
		}
	}
	return true
}

// isCodeRef reports a dotted reference such as process.env.API_KEY.
func isCodeRef(s string) bool {
	parts := 0
	for seg := range strings.SplitSeq(s, ".") {
		if seg == "" || isDigit(seg[0]) || !isIdentifier(seg) || strings.IndexByte(seg, '-') >= 0 {
			return false
		}
		parts++
	}
	return parts >= 2
}

func isPath(s string) bool {
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "~/")
}
