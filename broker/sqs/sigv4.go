package sqs

// SigV4 verification (shoal.sqs.auth=sigv4): the request's signature is
// computed again from the method, path, query, the signed headers and the
// body's SHA-256, with the secret of the access key its Credential names,
// and compared in constant time; a date more than 5 minutes off is
// refused, as AWS does. Query-string (presigned) signatures are refused.

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
)

// Credential is an access key the API accepts and the principal it maps
// to (User:<name> for the ACLs).
type Credential struct {
	AccessKeyID, Secret, Principal string
}

// LoadCredentials reads a credentials file: one access key per line,
// "ACCESS_KEY_ID SECRET_ACCESS_KEY [PRINCIPAL]", # comments. The
// principal defaults to User:<ACCESS_KEY_ID>.
func LoadCredentials(path string) (map[string]Credential, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]Credential{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 2 || len(fs) > 3 {
			return nil, fmt.Errorf("%s:%d: want ACCESS_KEY_ID SECRET_ACCESS_KEY [PRINCIPAL]", path, n)
		}
		c := Credential{AccessKeyID: fs[0], Secret: fs[1], Principal: "User:" + fs[0]}
		if len(fs) == 3 {
			c.Principal = fs[2]
		}
		if _, dup := out[c.AccessKeyID]; dup {
			return nil, fmt.Errorf("%s:%d: access key %s twice", path, n, c.AccessKeyID)
		}
		out[c.AccessKeyID] = c
	}
	return out, sc.Err()
}

// maxSkew is how far a request's date may be from now (AWS: 5 minutes).
const maxSkew = 5 * time.Minute

func authError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, shape: "com.amazon.coral.service#" + code + "Exception", legacy: code, msg: fmt.Sprintf(format, args...)}
}

// verify checks r's SigV4 signature over body and returns the principal.
func (s *Server) verify(r *http.Request, body []byte, now time.Time) (string, *apiError) {
	if r.URL.Query().Get("X-Amz-Signature") != "" {
		return "", authError(403, "AccessDenied", "Query-string (presigned) signatures are not accepted.")
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "", authError(403, "MissingAuthenticationToken", "Request is missing Authentication Token")
	}
	algo, rest, _ := strings.Cut(auth, " ")
	if algo != "AWS4-HMAC-SHA256" {
		return "", authError(400, "IncompleteSignature", "Unsupported AWS 'algorithm': '%s'.", algo)
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok {
			fields[k] = v
		}
	}
	cred, signed, sig := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if cred == "" || signed == "" || sig == "" {
		return "", authError(400, "IncompleteSignature", "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature'.")
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return "", authError(400, "IncompleteSignature", "Credential should be scoped to a valid region, not '%s'.", cred)
	}
	if scope[3] != "sqs" {
		return "", authError(403, "SignatureDoesNotMatch", "Credential should be scoped to correct service: 'sqs'.")
	}
	if names := ";" + signed + ";"; !strings.Contains(names, ";host;") || !strings.Contains(names, ";x-amz-date;") {
		return "", authError(400, "IncompleteSignature", "'Host' and 'X-Amz-Date' must be signed headers.")
	}
	key, ok := s.creds[scope[0]]
	if !ok {
		return "", authError(403, "InvalidClientTokenId", "The security token included in the request is invalid.")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return "", authError(400, "IncompleteSignature", "Authorization requires a valid X-Amz-Date header.")
	}
	if d := now.Sub(t); d > maxSkew || d < -maxSkew {
		return "", authError(400, "RequestExpired", "Request has expired.")
	}
	if scope[1] != amzDate[:8] {
		return "", authError(403, "SignatureDoesNotMatch", "Credential should be scoped to a valid date, not '%s'.", scope[1])
	}
	bodySum := sha256.Sum256(body)
	payload := hex.EncodeToString(bodySum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payload {
		// The signature covers the header, not the body: they must agree.
		return "", authError(400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	var canon strings.Builder
	canon.WriteString(r.Method + "\n")
	canon.WriteString(canonicalURI(r.URL) + "\n")
	canon.WriteString(canonicalQuery(r.URL.Query()) + "\n")
	names := strings.Split(signed, ";")
	for _, h := range names {
		v := r.Header.Values(http.CanonicalHeaderKey(h))
		if h == "host" {
			v = []string{r.Host}
		}
		if h == "content-length" && len(v) == 0 {
			v = []string{fmt.Sprint(r.ContentLength)}
		}
		vals := make([]string, len(v))
		for i, x := range v {
			vals[i] = strings.Join(strings.Fields(x), " ")
		}
		canon.WriteString(h + ":" + strings.Join(vals, ",") + "\n")
	}
	canon.WriteString("\n" + signed + "\n" + payload)
	sum := sha256.Sum256([]byte(canon.String()))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + strings.Join(scope[1:], "/") + "\n" + hex.EncodeToString(sum[:])
	k := hmacSHA256([]byte("AWS4"+key.Secret), scope[1])
	k = hmacSHA256(k, scope[2])
	k = hmacSHA256(k, scope[3])
	k = hmacSHA256(k, "aws4_request")
	want := hex.EncodeToString(hmacSHA256(k, toSign))
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return "", authError(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return key.Principal, nil
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalURI is the path as SigV4 has it for services other than S3:
// each segment's escaped form escaped again.
func canonicalURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = uriEscape(s)
	}
	return strings.Join(segs, "/")
}

func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			parts = append(parts, uriEscape(k)+"="+uriEscape(v))
		}
	}
	return strings.Join(parts, "&")
}

// uriEscape encodes all but RFC 3986's unreserved characters.
func uriEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
