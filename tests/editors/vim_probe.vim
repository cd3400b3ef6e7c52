" Report the syntax group of every byte of every file listed in g:txcl_list, as JSON in
" g:txcl_out: {"file": [[group per byte of line 1], ...], ...}, plus "filetype:<file>".
set nocompatible
let &runtimepath = g:txcl_rtp . ',' . &runtimepath
filetype on
syntax on
let s:result = {}
for s:file in readfile(g:txcl_list)
  execute 'silent edit ' . fnameescape(s:file)
  let s:lines = []
  for s:lnum in range(1, line('$'))
    let s:names = []
    for s:col in range(1, strlen(getline(s:lnum)))
      call add(s:names, synIDattr(synID(s:lnum, s:col, 1), 'name'))
    endfor
    call add(s:lines, s:names)
  endfor
  let s:result[s:file] = s:lines
  let s:result['filetype:' . s:file] = &filetype
  silent bwipeout!
endfor
call writefile([json_encode(s:result)], g:txcl_out)
qall!
