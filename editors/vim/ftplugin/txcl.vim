" TXCL filetype settings: '#' comments, keywords may contain no dots.
if exists("b:did_ftplugin")
  finish
endif
let b:did_ftplugin = 1

setlocal commentstring=#\ %s
setlocal comments=:#
setlocal iskeyword=@,48-57,_
setlocal formatoptions-=t

let b:undo_ftplugin = "setlocal commentstring< comments< iskeyword< formatoptions<"
