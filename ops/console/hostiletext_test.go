package console_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/ops/console"
)

// A foreign table's attribute names are hostile text: the page refusing the table shows none
// of them raw, neither markup nor a control character.
func TestTheRefusalOfAForeignTableShowsNoneOfItsTextRaw(t *testing.T) {
	t.Parallel()
	client := awstest.Client(t)
	hostile := "</p><script>x</script>\x1b[2J\x07\x0b\u202e"
	in := &dynamodb.CreateTableInput{BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(hostile), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(hostile), KeyType: types.KeyTypeHash}}}
	name := awstest.CreateTable(t, client, "foreign-page-", in)
	if err := console.CheckTable(context.Background(), client, name); !errors.Is(err, console.ErrNotOncehookTable) {
		t.Fatalf("CheckTable: %v", err)
	}
	h, err := console.New(console.Config{DynamoDB: client, Table: name, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	r := signedIn(t, h).get("/")
	if r.Status != http.StatusInternalServerError {
		t.Fatalf("%d:\n%s", r.Status, r.Body)
	}
	mustNotContain(t, r, "<script>x")
	for _, c := range r.Body {
		if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f || c == '\u202e' {
			t.Fatalf("the page shows %U raw:\n%q", c, r.Body)
		}
	}
}

// Targets named with hostile text are charted on the overview escaped, each row labelled by
// its name whole, and the page's markup is its own.
func TestTheOverviewChartsHostileTargetNamesEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	names := []string{"</svg><script>x</script>", `"><img src=x onerror=y>`, "javascript:alert(1)", "t\u202eevil", "</title><b>t</b>", strings.Repeat("long<", 60), "é日🙂&amp;"}
	at := time.Now().Add(-time.Hour)
	for i, n := range names {
		e.park("shop", "evt_"+strconv.Itoa(i), n, "err", at)
	}
	page := e.serve(nil).get("/")
	if page.Status != http.StatusOK {
		t.Fatalf("%d\n%s", page.Status, page.Body)
	}
	mustNotContain(t, page, "<script>x", "<img", "<b>t</b>")
	if o, c := strings.Count(page.Body, "<svg"), strings.Count(page.Body, "</svg>"); o != 2 || c != 2 {
		t.Fatalf("%d <svg, %d </svg>:\n%s", o, c, page.Body)
	}
	labels := map[string]bool{}
	for _, m := range regexp.MustCompile(`data-label="([^"]*)"`).FindAllStringSubmatch(page.Body, -1) {
		labels[html.UnescapeString(m[1])] = true
	}
	for _, n := range names {
		if !labels[n] {
			t.Errorf("no row labelled %q; labels %v", n, labels)
		}
	}
}
