package console

import "html/template"

var funcs = template.FuncMap{
	"link": link,
}
