" Vim syntax file
" Language:    TXCL (rule files, *.txcl)
" Maintainer:  the txcl project
" Follows the lexical rules of TXCL: keywords in any casing, EVERY/MAX as keywords only inside LOOP,
" paths with quoted segments, &functions, b64 strings, regexes only after =~ and !~.

if exists("b:current_syntax")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

syn iskeyword @,48-57,_

" Anything not matched below is an invalid character (TX001).
syn match txclError /[^ \t\r\nA-Za-z0-9_]/

" WITH keys (an identifier with an optional dotted tail). Keywords below win over this.
syn match txclWithKey /\<\h\w*\%(\.\%([A-Za-z0-9_-]\+\|"[^"]\+"\)\)*/

syn case ignore
syn keyword txclClause when set select with priority exec emit
syn keyword txclSelectWord as default
syn keyword txclUntil until
syn keyword txclBoolean true false
syn keyword txclNull null
syn keyword txclReserved fn let if else return
syn case match

" Numbers: the longest run of number characters must be exactly an int or a float.
syn match txclBadNumber /-\=\d[0-9A-Za-z_.-]*/
syn match txclNumber /-\=\d\+\%(\.\d\+\)\=\%([0-9A-Za-z_.-]\)\@!/

syn match txclOperator /==\|!=\|<=\|>=\|[<>=!*]\|&&\|||/
syn match txclDelimiter /[(),[\]]/

" Paths: .a.b, .labels."app.kubernetes.io/name", @web.req.body (= ._txc.web.req.body)
syn match txclPath /\.\h[A-Za-z0-9_-]*\%(\.\%([A-Za-z0-9_-]\+\|"[^"]\+"\)\)*/
syn match txclTxcPath /@\h[A-Za-z0-9_-]*\%(\.\%([A-Za-z0-9_-]\+\|"[^"]\+"\)\)*/

syn match txclFunction /&\h\w*\ze(/
syn match txclBadCall /&\h\w*\%(\w\|(\)\@!/

syn region txclString matchgroup=txclQuote start=/\%(b64\)\="/ skip=/\\[\\"]/ end=/"/ contains=txclEscape
syn match txclEscape /\\[\\"nrt]/ contained

" A regex literal may follow =~ / !~, with whitespace and comments in between.
syn match txclMatchOp /[=!]\~/ nextgroup=txclRegex,txclBadRegex,txclRegexGapComment skipwhite skipnl skipempty
syn match txclRegexGapComment /#.*$/ contained nextgroup=txclRegex,txclBadRegex,txclRegexGapComment skipwhite skipnl skipempty
syn match txclBadRegex +/.*$+ contained
syn match txclRegex +/\%(\\.\|[^/\\]\)*/+ contained

syn match txclComment /#.*$/ contains=txclTodo
syn keyword txclTodo TODO FIXME XXX NOTE contained

" LOOP clause: UNTIL, SET, EVERY and MAX are its modifiers; another clause keyword ends it.
syn case ignore
syn keyword txclLoopModifier every max until set contained
syn region txclLoop matchgroup=txclClause start=/\<loop\>/ end=/\ze\<\%(when\|select\|with\|priority\|exec\|emit\)\>/ contains=ALLBUT,txclLoop,txclWithKey,txclEscape,txclRegex,txclBadRegex,txclRegexGapComment,txclTodo
syn case match

hi def link txclClause        Keyword
hi def link txclSelectWord    Keyword
hi def link txclUntil         Keyword
hi def link txclLoopModifier  Keyword
hi def link txclBoolean       Boolean
hi def link txclNull          Constant
hi def link txclReserved      Error
hi def link txclNumber        Number
hi def link txclBadNumber     Error
hi def link txclOperator      Operator
hi def link txclMatchOp       Operator
hi def link txclDelimiter     Delimiter
hi def link txclPath          Identifier
hi def link txclTxcPath       Special
hi def link txclWithKey       Type
hi def link txclFunction      Function
hi def link txclBadCall       Error
hi def link txclString        String
hi def link txclQuote         String
hi def link txclEscape        SpecialChar
hi def link txclRegex         String
hi def link txclRegexGapComment Comment
hi def link txclBadRegex      Error
hi def link txclComment       Comment
hi def link txclTodo          Todo
hi def link txclError         Error

let b:current_syntax = "txcl"

let &cpo = s:cpo_save
unlet s:cpo_save
